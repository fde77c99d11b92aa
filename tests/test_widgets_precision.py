"""The numberline and bits widgets (docs/precision.md) in chromium: the float rounding and bit
encoding they do in the browser (GF.logic.precision) agree exactly with torch's casts and bit
views and with gradflow_ref.precision, and their controls show the value asked for.

torch casts a float64 to FP16, BF16 and FP8 through FP32 (two roundings), and so does the
browser; gradflow_ref.precision rounds once. The two agree on every FP32 value, so the
comparisons with gradflow_ref use inputs that FP32 holds exactly.
"""

from __future__ import annotations

import math
import random
import re

import pytest
import torch

from gradflow_ref.precision import FORMATS, classify, neighbours, ulp
from tests._browser import open_page

pytestmark = [pytest.mark.build, pytest.mark.browser]

INTS = {1: torch.uint8, 2: torch.int16, 4: torch.int32}


def samples() -> list[float]:
    """Boundaries of every format (max, overflow ties, min normal, min subnormal, its half),
    halfway ties, ties broken below FP32's precision, and random values over 1e-46..1e39."""
    xs = [0.0, -0.0, math.inf, -math.inf, 0.1, 1 / 3, 5.75, -5.75, 1000.001, 3e-5, 1e-7, 65520.0]
    for f in FORMATS.values():
        for base in (f.max, f.min_normal, f.min_subnormal, 1.0, 3.0, 1000.0):
            u = ulp(base, f)
            xs += [base, base + u / 2, base - u / 4, base + u / 2 + u / 8, base + 3 * u / 2]
            xs += [base - u / 2]
        top = math.ldexp(1.0, f.emax - f.mantissa_bits)  # spacing below max
        xs += [f.max + top / 2, f.max + top / 2 - top / 8, f.max + top, 2 * f.max]
        xs += [f.min_subnormal / 2, f.min_subnormal / 2 * 1.01, f.min_subnormal / 4]
        xs += [f.min_subnormal * 1.5, f.min_subnormal * 2.5, f.min_normal - f.min_subnormal / 2]
        xs += [1 + f.eps / 2 + 2.0**-40, 1 + f.eps / 2 - 2.0**-40]
    rng = random.Random(0)
    xs += [rng.choice((-1, 1)) * 10 ** rng.uniform(-46, 39) for _ in range(200)]
    return xs + [-x for x in xs[:60]]


SAMPLES = samples()
FP32_EXACT = [x for x in SAMPLES if torch.tensor(x, dtype=torch.float64).float().item() == x]


def js(x: float) -> str:
    """A float as a string JavaScript's Number() reads back exactly (inf, -0 and NaN included)."""
    return "Infinity" if x == math.inf else "-Infinity" if x == -math.inf else repr(x)


def same(a: float, b: float) -> bool:
    """Equal, with NaN equal to NaN and 0.0 different from -0.0."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


@pytest.fixture(scope="module")
def page(browser, server):
    with open_page(browser, server, "precision/") as (page, record):
        yield page
        assert not record["errors"]


def in_browser(page, fn: str, name: str, xs: list[float]):
    return page.evaluate(
        f"""([name, xs]) => xs.map((s) => {{
            const v = GF.logic.precision.{fn}(name, Number(s));
            return typeof v === "number" ? (Object.is(v, -0) ? "-0" : String(v)) : v;
        }})""",
        [name, [js(x) for x in xs]],
    )


@pytest.mark.parametrize("name", list(FORMATS))
def test_precision_round_matches_torch_cast(page, name):
    f = FORMATS[name]
    expected = torch.tensor(SAMPLES, dtype=torch.float64).to(f.dtype).double().tolist()
    got = [float(v) for v in in_browser(page, "round", name, SAMPLES)]
    bad = [(x, g, e) for x, g, e in zip(SAMPLES, got, expected) if not same(g, e)]
    assert not bad, f"{name}: {len(bad)} of {len(SAMPLES)} differ, first {bad[:3]}"


@pytest.mark.parametrize("name", list(FORMATS))
def test_precision_bits_match_torch_bit_view(page, name):
    f = FORMATS[name]
    xs = SAMPLES + [math.nan]
    codes = torch.tensor(xs, dtype=torch.float64).to(f.dtype).view(INTS[f.bytes]).long()
    expected = [format(c % 2**f.bits, f"0{f.bits}b") for c in codes.tolist()]
    got = in_browser(page, "bits", name, xs)
    bad = [(x, g, e) for x, g, e in zip(xs, got, expected) if g != e]
    assert not bad, f"{name}: {len(bad)} of {len(xs)} differ, first {bad[:3]}"


@pytest.mark.parametrize("name", list(FORMATS))
def test_precision_classify_matches_gradflow_ref(page, name):
    got = in_browser(page, "classify", name, FP32_EXACT)
    expected = [classify(x, name) for x in FP32_EXACT]
    assert got == expected


@pytest.mark.parametrize("name", list(FORMATS))
def test_precision_neighbours_match_gradflow_ref(page, name):
    f = FORMATS[name]
    xs = [x for x in FP32_EXACT if math.isfinite(x) and abs(x) <= f.max][:120]
    got = page.evaluate(
        "([name, xs]) => xs.map((s) => GF.logic.precision.neighbours(name, Number(s), 2))",
        [name, [js(x) for x in xs]],
    )
    for x, g in zip(xs, got):
        assert g == neighbours(x, name, 2), f"{name}: neighbours of {x!r}"


def numberline_state(page) -> dict[str, str]:
    return page.locator('[data-gf-widget="numberline"] .gf-status').evaluate(
        "e => ({...e.dataset, text: e.textContent})"
    )


def test_numberline_slider_ends_overflow_and_underflow(page):
    fig = page.locator('[data-gf-widget="numberline"]')
    slider = fig.get_by_role("slider", name="Value")
    slider.press("End")
    state = numberline_state(page)
    assert float(state["value"]) == 1e5
    assert state["float16"] == "Infinity" and state["float8E4m3fn"] == "448"
    assert "overflows in FP16, FP8 E4M3, FP8 E5M2" in state["text"]
    slider.press("Home")
    state = numberline_state(page)
    assert float(state["value"]) == 1e-9
    assert state["float16"] == "0" and "rounds to 0 in FP16" in state["text"]
    assert float(state["float32"]) == torch.tensor(1e-9).item()


@pytest.mark.parametrize("text", ["65520", "2^-24", "-3e-5"])
def test_numberline_typed_value_is_stored_as_torch_stores_it(page, text):
    x = -3e-5 if text == "-3e-5" else 65520.0 if text == "65520" else 2.0**-24
    fig = page.locator('[data-gf-widget="numberline"]')
    fig.get_by_role("textbox", name="or type one").fill(text)
    state = numberline_state(page)
    assert float(state["value"]) == x
    for name, f in FORMATS.items():
        key = re.sub(r"_(\w)", lambda m: m.group(1).upper(), name)
        expected = torch.tensor(x, dtype=torch.float64).to(f.dtype).item()
        assert same(float(state[key]), expected), f"{name} stores {expected}"


def test_bits_widget_shows_the_fields_torch_stores(page):
    fig = page.locator('[data-gf-widget="bits"]')
    fig.get_by_role("textbox", name="Number").fill("-5.75")
    for name, f in FORMATS.items():
        row = fig.locator(f'.gf-bits__row[data-format="{name}"]')
        code = torch.tensor(-5.75).to(f.dtype).view(INTS[f.bytes]).item() % 2**f.bits
        assert row.get_attribute("data-bits") == format(code, f"0{f.bits}b")
        assert row.locator(".gf-bits__field").count() == 3
        stored = torch.tensor(-5.75).to(f.dtype).item()
        assert f"= {stored:g}" in row.text_content()
    # 5.75 = 1.0111 x 2**2 needs four mantissa bits; the tie rounds to the even 6 in FP8
    status = fig.locator(".gf-status").text_content()
    assert "exactly in FP32, FP16, BF16; rounded in FP8 E4M3, FP8 E5M2" in status


def test_bits_widget_explains_invalid_input(page):
    fig = page.locator('[data-gf-widget="bits"]')
    box = fig.get_by_role("textbox", name="Number")
    box.fill("abc")
    status = fig.locator(".gf-status")
    assert "“abc” is not a number" in status.text_content()
    assert box.get_attribute("aria-invalid") == "true"
    assert not fig.locator(".gf-bits__rows").is_visible()
    assert "NaN" not in fig.locator(".gf-widget__live").inner_text()
    box.fill("0.1")
    assert box.get_attribute("aria-invalid") == "false"
    assert fig.locator(".gf-bits__rows").is_visible()
