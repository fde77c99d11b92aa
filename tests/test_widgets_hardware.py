"""The roofline widget (docs/hardware.md) in chromium: GF.logic.roofline against
gradflow_ref.roofline, presets, keyboard, touch, both colour schemes and a 390 px screen.

Tolerance: the browser computes in float64 like Python, so bounds agree to rtol 1e-12.
"""

from __future__ import annotations

import pytest

from gradflow_ref.hardware import GPUS
from gradflow_ref.roofline import Matmul, matmul_bound
from tests._browser import mounted, open_page

pytestmark = [pytest.mark.build, pytest.mark.browser]

ROOF = '[data-gf-widget="roofline"]'
SHAPES = [(1, 11008, 4096), (4096, 11008, 4096), (512, 4096, 4096), (7, 3, 5), (8192, 8192, 8192)]
CASES = [
    (gpu, dtype, shape)
    for gpu in GPUS
    for dtype in ("bf16", "tf32", "fp8", "fp64_tensor")
    if dtype in GPUS[gpu].tflops
    for shape in SHAPES
]
BYTES = {"bf16": 2, "tf32": 4, "fp8": 1, "fp64_tensor": 8}


@pytest.fixture(scope="module")
def page(browser, server):
    with open_page(browser, server, "hardware/") as (page, record):
        yield page
        assert not record["errors"]


def status(page):
    return page.locator(f"{ROOF} .gf-status")


@pytest.mark.parametrize(("gpu", "dtype", "shape"), CASES)
def test_logic_roofline_matches_gradflow_ref(page, gpu, dtype, shape):
    m, n, k = shape
    ours = page.evaluate(
        "([m, n, k, b, peak, bw]) => GF.logic.roofline.bound("
        "GF.logic.roofline.matmul(m, n, k, b), peak, bw)",
        [m, n, k, BYTES[dtype], GPUS[gpu].tflops[dtype] * 1e12, GPUS[gpu].memory_bytes_per_s],
    )
    ref = matmul_bound(Matmul(m, n, k, BYTES[dtype]), gpu, dtype)
    for js, py in (
        ("intensity", "intensity"),
        ("ridge", "ridge"),
        ("attainable", "attainable_flops"),
        ("timeS", "time_s"),
        ("computeS", "compute_s"),
        ("memoryS", "memory_s"),
    ):
        assert ours[js] == pytest.approx(getattr(ref, py), rel=1e-12)
    assert ours["bound"] == ref.bound


def test_presets_switch_from_memory_to_compute_bound(page):
    page.reload()
    page.wait_for_function(mounted)
    assert status(page).get_attribute("data-bound") == "memory"
    preset = page.locator(f"{ROOF} select").nth(2)
    preset.select_option(index=2)  # the 4096-token preset
    assert status(page).get_attribute("data-bound") == "compute"
    ref = matmul_bound(Matmul(4096, 11008, 4096), "H100 SXM", "bf16")
    assert float(status(page).get_attribute("data-time")) == pytest.approx(ref.time_s, rel=1e-12)


def test_typed_shape_and_keyboard_gpu_choice(page):
    page.reload()
    page.wait_for_function(mounted)
    m = page.locator(f"{ROOF} input[type=number]").first
    m.fill("2048")
    ref = matmul_bound(Matmul(2048, 11008, 4096), "H100 SXM", "bf16")
    assert float(status(page).get_attribute("data-intensity")) == pytest.approx(ref.intensity)
    assert page.locator(f"{ROOF} select").nth(2).input_value() == ""  # preset shows "custom"
    gpu = page.locator(f"{ROOF} select").first
    gpu.focus()
    gpu.select_option("A100 80GB SXM")  # what a keyboard user picks; change event fires
    ref = matmul_bound(Matmul(2048, 11008, 4096), "A100 80GB SXM", "bf16")
    assert float(status(page).get_attribute("data-ridge")) == pytest.approx(ref.ridge)
    options = page.locator(f"{ROOF} select").nth(1).locator("option").all_text_contents()
    assert "FP8" not in options  # the A100 has no FP8 tensor cores


@pytest.mark.parametrize("scheme", ["default", "slate"])
def test_roofline_fits_a_phone_and_takes_a_preset(browser, server, scheme):
    with open_page(browser, server, "hardware/", scheme=scheme, width=390) as (page, record):
        wide = page.eval_on_selector_all(
            "[data-gf-widget]",
            "els => els.filter(e => e.scrollWidth > e.clientWidth + 1)"
            ".map(e => e.dataset.gfWidget)",
        )
        assert not wide
        preset = page.locator(f"{ROOF} select").nth(2)
        preset.scroll_into_view_if_needed()
        preset.select_option(index=2)  # what the phone's picker does: a change event
        assert status(page).get_attribute("data-bound") == "compute"
        assert not record["errors"]
