"""The clipping widget (docs/clipping.md) in chromium: the clipping formulas it runs in the
browser (GF.logic.clipping) against gradflow_ref.clipping and torch.nn.utils, and its controls
(arrow keys, number inputs, threshold slider, dragging).

Tolerances: the browser computes in float64 (JavaScript numbers). Against float64 tensors it
agrees to rtol 1e-12 (the norm's summation order may differ by an ulp); against float32 tensors,
fed the same float32-representable inputs, to rtol 1e-6 (a few float32 roundings, 6e-8 each).
"""

from __future__ import annotations

import pytest
import torch

from gradflow_ref.clipping import angle_between, clip_grad_norm_, clip_grad_value_
from tests._browser import mounted, open_page

pytestmark = [pytest.mark.build, pytest.mark.browser]

# (gradient, threshold): zero, already short, negative components, exactly at the threshold
# (the 1e-6 still scales it), tiny gradients where the 1e-6 dominates, more than two elements
SAMPLES = [
    ([3.0, 4.0], 1.0),
    ([3.0, 4.0], 10.0),
    ([0.0, 0.0], 1.0),
    ([0.3, -0.4], 1.0),
    ([-2.4, 0.6], 1.0),
    ([-5.0, -12.0], 2.0),
    ([0.6, 0.8], 1.0),
    ([3e-7, 4e-7], 1e-7),
    ([1e-7, 0.0], 1e-7),
    ([1e3, -2e3], 0.5),
    ([0.9, 0.9], 1.0),
    ([1.0, -2.0, 3.0, -4.0, 0.5], 2.5),
]
IDS = [f"{g}-{c}" for g, c in SAMPLES]


def clipped(fn, values, threshold, dtype):
    """Apply an in-place clip function to one parameter whose .grad is `values`."""
    p = torch.zeros(len(values), dtype=dtype, requires_grad=True)
    p.grad = torch.tensor(values, dtype=dtype)
    fn(p, threshold)
    return p.grad


def f32(values):
    """The float32 value of each element, as Python floats (what a float32 tensor holds)."""
    return torch.tensor(values, dtype=torch.float32).tolist()


@pytest.fixture(scope="module")
def page(browser, server):
    with open_page(browser, server, "clipping/") as (page, record):
        yield page
        assert not record["errors"]


@pytest.fixture
def widget(page):
    """The widget, reset to its starting state by reloading the page."""
    page.reload()
    page.wait_for_function(mounted)
    return page.locator('[data-gf-widget="clipping"]')


def run(page, fn, g, c):
    return page.evaluate(f"([g, c]) => GF.logic.clipping.{fn}(g, c)", [g, c])


@pytest.mark.parametrize(("g", "c"), SAMPLES, ids=IDS)
def test_clip_norm_matches_gradflow_ref_in_float64(page, g, c):
    ours = torch.tensor(run(page, "clipNorm", g, c), dtype=torch.float64)
    expected = clipped(clip_grad_norm_, g, c, torch.float64)
    torch.testing.assert_close(ours, expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize(("g", "c"), SAMPLES, ids=IDS)
def test_clip_norm_matches_torch_and_gradflow_ref_in_float32(page, g, c):
    g = f32(g)
    ours = torch.tensor(run(page, "clipNorm", g, c), dtype=torch.float64)
    for fn in (clip_grad_norm_, torch.nn.utils.clip_grad_norm_):
        expected = clipped(fn, g, c, torch.float32).double()
        torch.testing.assert_close(ours, expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize(("g", "c"), SAMPLES, ids=IDS)
def test_clip_value_matches_torch_and_gradflow_ref(page, g, c):
    ours = run(page, "clipValue", g, c)
    assert ours == clipped(clip_grad_value_, g, c, torch.float64).tolist()
    ours32 = torch.tensor(run(page, "clipValue", f32(g), c), dtype=torch.float64)
    for fn in (clip_grad_value_, torch.nn.utils.clip_grad_value_):
        expected = clipped(fn, f32(g), c, torch.float32).double()
        torch.testing.assert_close(ours32, expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize(("g", "c"), SAMPLES, ids=IDS)
def test_clipping_angle_matches_angle_between(page, g, c):
    for fn in ("clipNorm", "clipValue"):
        turned = page.evaluate(
            f"([g, c]) => GF.logic.clipping.angle(g, GF.logic.clipping.{fn}(g, c))", [g, c]
        )
        if not any(g):
            assert turned is None  # angle_between refuses a zero vector: no direction
            with pytest.raises(ValueError):
                angle_between(torch.tensor(g), torch.tensor(g))
            continue
        v = torch.tensor(run(page, fn, g, c), dtype=torch.float64)
        # acos near 1 turns an ulp of cosine into ~1e-6 degrees
        assert turned == pytest.approx(
            angle_between(torch.tensor(g, dtype=torch.float64), v), abs=1e-5
        )


def shown(widget) -> dict[str, list[float]]:
    status = widget.locator(".gf-status")
    return {
        key: [float(v) for v in status.get_attribute(f"data-{key}").split(",")]
        for key in ("gradient", "threshold", "by-norm", "by-value")
    }


def expect_consistent(state):
    g, (c,) = state["gradient"], state["threshold"]
    for key, fn in (("by-norm", clip_grad_norm_), ("by-value", clip_grad_value_)):
        expected = clipped(fn, g, c, torch.float64)
        torch.testing.assert_close(
            torch.tensor(state[key], dtype=torch.float64), expected, rtol=1e-12, atol=0
        )


def test_clipping_widget_arrow_keys_move_the_gradient(widget):
    handle = widget.get_by_role("slider", name="Gradient tip")
    assert shown(widget)["gradient"] == [2.4, 0.6]
    for key in ["ArrowLeft"] * 4 + ["ArrowUp"] * 2 + ["Shift+ArrowDown"]:
        handle.press(key)
    state = shown(widget)
    assert state["gradient"] == [2.0, 0.3]
    expect_consistent(state)
    assert widget.get_by_label("Component 1").input_value() == "2"
    assert widget.get_by_label("Component 2").input_value() == "0.3"
    assert "length 2.02" in handle.get_attribute("aria-valuetext")


def test_clipping_widget_number_inputs_and_threshold_slider(widget):
    widget.get_by_label("Component 1").fill("-0.5")
    widget.get_by_label("Component 2").fill("2")
    widget.get_by_role("slider", name="Threshold c").fill("0.5")
    state = shown(widget)
    assert state["gradient"] == [-0.5, 2.0]
    assert state["threshold"] == [0.5]
    assert state["by-value"] == [-0.5, 0.5]
    expect_consistent(state)
    radius = widget.locator("circle:not([role])").get_attribute("r")
    assert float(radius) == pytest.approx(0.5 * 280 / 6)  # 280 px of viewBox span 6 units
    text = widget.locator(".gf-status").text_content()
    assert "Value clipping gives (-0.50, 0.50): length 0.71, turned 31.0°" in text


def test_clipping_widget_number_box_shows_the_value_it_uses(widget):
    box = widget.get_by_label("Component 1")
    box.fill("99")
    box.press("Tab")  # committing the entry
    assert shown(widget)["gradient"][0] == 3.0  # the plot spans -3..3
    assert box.input_value() == "3"
    assert "99 is outside the plot: using 3" in widget.locator(".gf-status").text_content()


def test_clipping_widget_follows_a_drag(widget, page):
    handle = widget.get_by_role("slider", name="Gradient tip")
    # Mouse input reaches only what is on screen, and at the point the handle really is.
    # content-visibility: auto keeps placeholder geometry until the browser lays a section out,
    # and widgets above may still mount (on idle) and move it: wait for real, settled layout,
    # i.e. two animation frames, the same box twice in a row, and the handle itself under the
    # point the mouse will press (a loaded machine can take many frames).
    box = None
    for _ in range(100):
        handle.scroll_into_view_if_needed()
        page.evaluate(
            "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
        )
        again = handle.bounding_box()
        hit = again is not None and handle.evaluate(
            "(h, [x, y]) => h.contains(document.elementFromPoint(x, y))",
            [again["x"] + again["width"] / 2, again["y"] + again["height"] / 2],
        )
        if hit and again == box:
            break
        box = again
    plot = widget.locator("svg.gf-clip__plot").bounding_box()
    px_per_unit = plot["width"] / 300 * 280 / 6
    x0, y0 = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x0, y0)
    page.mouse.down()
    page.mouse.move(x0 - 1.5 * px_per_unit, y0 - px_per_unit, steps=5)
    page.mouse.up()
    state = shown(widget)
    assert state["gradient"] == pytest.approx([0.9, 1.6], abs=0.02)
    expect_consistent(state)
