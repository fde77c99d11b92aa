"""The loss-scaling widgets (docs/loss_scaling.md) in chromium.

loss_scaling_histogram: the FP16 counts the browser derives from a log2 histogram
(GF.logic.loss_scaling_histogram.counts) against torch's own cast, `(g * 2^k).half()`, on tensors
built to sit on every rounding boundary and on the page's real gradients; and the slider.
dynamic_scaling: the update rule the browser runs (GF.logic.dynamic_scaling.next) against the
recorded gradflow_ref run, and against gradflow_ref's and torch's GradScaler on injected inf
gradients with odd factors; and the step controls. All comparisons are exact (tolerance 0):
counts are integers and scales are float32 values, which JavaScript numbers hold exactly.
"""

from __future__ import annotations

import math

import pytest
import torch

from gradflow_ref.loss_scaling import GradScaler
from tests._browser import open_page

pytestmark = [pytest.mark.build, pytest.mark.browser]

EXPONENTS = list(range(25))
MIN_NORMAL = 2.0**-14


@pytest.fixture(scope="module")
def page(browser, server):
    with open_page(browser, server, "loss_scaling/") as (page, record):
        yield page
        assert not record["errors"]


def widget_data(page, name: str) -> dict:
    return page.evaluate(
        f"JSON.parse(document.querySelector('[data-gf-widget={name}]').dataset.gfData)"
    )


def histogram(g: torch.Tensor) -> dict:
    """The histogram the page builds: bins (2^((i-1)/4), 2^(i/4)] of |g| and the two slivers."""
    mag = g.abs().double()
    bins = torch.ceil(mag.log2() * 4).long()
    first = int(bins.min())

    def sliver(top, bits):
        lo = top * (1 - 2.0**-bits)
        return [int(((mag >= lo / 2.0**k) & (mag <= top / 2.0**k)).sum()) for k in EXPONENTS]

    return {
        "width": 0.25,
        "first": first,
        "counts": torch.bincount(bins - first).tolist(),
        "exponents": EXPONENTS,
        "sliver": {"normal": sliver(MIN_NORMAL, 11), "inf": sliver(2.0**16, 12)},
    }


def fp16_counts(g: torch.Tensor, k: int) -> dict:
    stored = (g * 2.0**k).half()
    return {
        "zero": int((stored == 0).sum()),
        "subnormal": int(((stored != 0) & (stored.abs() < MIN_NORMAL)).sum()),
        "overflow": int(stored.isinf().sum()),
    }


def boundary_gradients() -> torch.Tensor:
    """float32 gradients on and next to each FP16 rounding boundary, at every scale 2^-k."""
    edges = [2.0**-25, 2.0**-24, MIN_NORMAL - 2.0**-25, MIN_NORMAL - 2.0**-24, MIN_NORMAL, 65504.0]
    edges += [65520.0, 65536.0]
    values = []
    for k in EXPONENTS:
        for e in edges:
            x = torch.tensor(e / 2.0**k, dtype=torch.float32)
            up = torch.nextafter(x, torch.tensor(math.inf))
            down = torch.nextafter(x, torch.tensor(0.0))
            values += [x, up, down, -x]
    g = torch.stack(values)
    spread = torch.logspace(-12, -1, 400, base=2.0, dtype=torch.float32)
    return torch.cat([g, spread, -spread * 0.7])


def test_loss_scaling_histogram_counts_match_torch_on_rounding_boundaries(page):
    g = boundary_gradients()
    hist = histogram(g)
    ours = page.evaluate(
        "h => h.exponents.map(k => GF.logic.loss_scaling_histogram.counts(h, k))", hist
    )
    assert ours == [fp16_counts(g, k) for k in EXPONENTS]


def test_loss_scaling_histogram_counts_match_the_pages_torch_counts(page):
    data = widget_data(page, "loss_scaling_histogram")
    ours = page.evaluate(
        "d => d.exponents.map(k => GF.logic.loss_scaling_histogram.counts(d, k))", data
    )
    fp16 = data["fp16"]
    expected = [
        {name: fp16[name][i] for name in ("zero", "subnormal", "overflow")}
        for i in range(len(data["exponents"]))
    ]
    assert ours == expected
    assert sum(data["counts"]) == data["total"]
    # the page's logit gradients late in training: most are zero in FP16 unscaled, few at
    # GradScaler's default 2^16, and none overflows even at 2^24
    total = data["total"]
    assert fp16["zero"][0] > 0.9 * total and fp16["zero"][16] < 0.05 * total
    assert not any(fp16["overflow"])


def test_loss_scaling_histogram_slider_updates_the_status(page):
    data = widget_data(page, "loss_scaling_histogram")
    widget = page.locator('[data-gf-widget="loss_scaling_histogram"]')
    slider, status = widget.locator("input[type=range]"), widget.locator(".gf-status")
    for keys, k in ((["End"], 24), (["Home"] + ["ArrowRight"] * 8, 8)):
        slider.focus()
        for key in keys:
            slider.press(key)
        assert status.get_attribute("data-scale") == str(k)
        for name in ("zero", "subnormal", "overflow"):
            assert status.get_attribute(f"data-{name}") == str(data["fp16"][name][k])
        assert f"2^{k}" in status.inner_text()
        assert f"2^{k}" in widget.locator("svg.gf-chart").get_attribute("aria-label")


def test_dynamic_scaling_next_replays_the_recorded_run(page):
    data = widget_data(page, "dynamic_scaling")
    replayed = page.evaluate(
        """d => d.scale.map((s, t) => GF.logic.dynamic_scaling.next(
            {scale: s, tracker: t ? d.tracker[t - 1] : 0}, !!d.inf[t]))""",
        data,
    )
    assert [r["scale"] for r in replayed] == data["after"]
    assert [r["tracker"] for r in replayed] == data["tracker"]
    assert data["scale"][1:] == data["after"][:-1] and data["scale"][0] == data["init_scale"]
    # the run shows both halves of the rule
    assert sum(data["inf"]) >= 3 and max(data["after"]) > data["init_scale"]


def scaler_history(scaler, found_inf: list[bool]) -> list[tuple[float, int]]:
    """Drive a scaler through steps whose gradient is inf where `found_inf` says so."""
    p = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.SGD([p], lr=0.1)
    out = []
    for bad in found_inf:
        scaler.scale(p.sum()).backward()
        p.grad.fill_(math.inf if bad else 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        out.append((scaler.get_scale(), scaler.state_dict()["_growth_tracker"]))
    return out


@pytest.mark.parametrize(
    ("init", "growth", "backoff", "interval"),
    [(2.0**16, 2.0, 0.5, 3), (1.7, 3.0, 0.3, 2), (2.0**125, 4.0, 0.5, 1), (1e-3, 1.5, 0.9, 4)],
)
def test_dynamic_scaling_next_matches_gradflow_ref_and_torch(page, init, growth, backoff, interval):
    found = [False] * 7 + [True, True] + [False] * 9 + [True] + [False] * 5
    cfg = {"growthFactor": growth, "backoffFactor": backoff, "growthInterval": interval}
    ours = page.evaluate(
        """([init, found, cfg]) => {
            let state = {scale: Math.fround(init), tracker: 0};
            return found.map(f => { state = GF.logic.dynamic_scaling.next(state, f, cfg);
                                     return [state.scale, state.tracker]; });
        }""",
        [init, found, cfg],
    )
    kwargs = dict(
        init_scale=init, growth_factor=growth, backoff_factor=backoff, growth_interval=interval
    )
    expected = scaler_history(GradScaler(**kwargs), found)
    assert [tuple(x) for x in ours] == expected
    assert expected == scaler_history(torch.amp.GradScaler("cpu", **kwargs), found)


def test_dynamic_scaling_buttons_and_slider_step_through_the_run(page):
    data = widget_data(page, "dynamic_scaling")
    widget = page.locator('[data-gf-widget="dynamic_scaling"]')
    status = widget.locator(".gf-status")

    def shows(t):
        assert status.get_attribute("data-step") == str(t)
        assert float(status.get_attribute("data-scale")) == data["scale"][t]
        assert status.get_attribute("data-inf") == str(data["inf"][t])
        assert float(status.get_attribute("data-next")) == data["after"][t]

    slider = widget.locator("input[type=range]")
    slider.focus()
    slider.press("Home")
    shows(0)
    widget.get_by_role("button", name="Next step").click()
    widget.get_by_role("button", name="Next step").click()
    shows(2)
    widget.get_by_role("button", name="Previous step").click()
    shows(1)
    first_skip = data["inf"].index(1)
    slider.focus()
    slider.press("Home")
    for _ in range(first_skip):
        slider.press("ArrowRight")
    shows(first_skip)
    assert "skipped" in status.inner_text()
    widget.get_by_role("button", name="Play").click()
    page.wait_for_function(
        f"+document.querySelector('[data-gf-widget=dynamic_scaling] .gf-status')"
        f".dataset.step >= {first_skip + 3}"
    )
    widget.get_by_role("button", name="Pause").click()
    t = int(status.get_attribute("data-step"))
    shows(t)


def test_loss_scaling_histogram_draws_every_fp16_zone_with_positive_width(page):
    widget = page.locator('[data-gf-widget="loss_scaling_histogram"]')
    widths = widget.locator("svg.gf-chart rect[fill-opacity]").evaluate_all(
        "rects => rects.map(r => +r.getAttribute('width'))"
    )
    # zero, subnormal and overflow, however small the page's gradients are
    assert len(widths) == 3 and all(w > 0 for w in widths)
