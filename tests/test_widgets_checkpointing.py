"""The checkpointing widget (docs/checkpointing.md) in chromium.

The event order the page recorded from gradflow_ref's checkpoint_sequential against the same
hooks on torch.utils.checkpoint.checkpoint_sequential; the counts the browser derives from it
(GF.logic.checkpointing.replay and .formulas) against gradflow_ref's measure() (SavedTensorMeter
and count_forwards); and the controls. Counts are integers: compared exactly.
"""

from __future__ import annotations

from functools import partial

import pytest
import torch
from torch.utils.checkpoint import checkpoint_sequential as torch_checkpoint_sequential

from gradflow_ref.checkpointing import checkpoint_sequential, measure, mlp
from tests._browser import open_page

pytestmark = [pytest.mark.build, pytest.mark.browser]

SAMPLES = [(2, 1), (2, 2), (5, 2), (7, 3), (8, 8), (9, 4), (12, 5), (16, 1), (16, 4), (16, 6)]


@pytest.fixture(scope="module")
def page(browser, server):
    with open_page(browser, server, "checkpointing/") as (page, record):
        yield page
        assert not record["errors"]


@pytest.fixture(scope="module")
def data(page) -> dict:
    return page.evaluate(
        "JSON.parse(document.querySelector('[data-gf-widget=checkpointing]').dataset.gfData)"
    )


def torch_events(n: int, segments: int) -> str:
    """Layer events of torch's checkpoint_sequential, with the hooks the page uses."""
    layers, events, phase = mlp(n, 4), [], ["F"]
    x = torch.randn(1, 4, requires_grad=True)

    def after(i):
        def hook(module, args, out):
            if phase[0] == "F" and i < n:
                out.register_hook(lambda grad: events.append(f"B{i + 1}"))

        return hook

    for i, layer in enumerate(layers, start=1):
        layer.register_forward_pre_hook(lambda m, a, i=i: events.append(f"{phase[0]}{i}"))
        layer.register_forward_hook(after(i))
    x.register_hook(lambda g: events.append("B1"))
    out = torch_checkpoint_sequential(layers, segments, x, use_reentrant=False)
    phase[0] = "R"
    out.sum().backward()
    return " ".join(events)


@pytest.mark.parametrize(("n", "s"), SAMPLES)
def test_checkpointing_recorded_events_match_torch(data, n, s):
    assert data["runs"][f"{n}/{s}"]["events"] == torch_events(n, s)


@pytest.mark.parametrize(("n", "s"), SAMPLES)
def test_checkpointing_formulas_match_measure(page, n, s):
    layers = mlp(n, 4)
    x = torch.randn(3, 4)
    stats = measure(partial(checkpoint_sequential, layers, s, x), layers)
    ours = page.evaluate(f"GF.logic.checkpointing.formulas({n}, {s})")
    assert ours["held"] * x.nbytes == stats.saved_bytes
    assert ours["recomputed"] == stats.recomputed
    assert ours["forwards"] == stats.forwards + stats.recomputed


def test_checkpointing_replay_matches_the_measurements_for_every_run(page, data):
    assert len(data["runs"]) == sum(range(2, 17))
    summary = page.evaluate(
        """runs => Object.entries(runs).map(([key, run]) => {
            const [n, s] = key.split('/').map(Number);
            const frames = GF.logic.checkpointing.replay(n, s, run.events.split(' '));
            const end = frames[frames.length - 1];
            return {key, afterForward: frames[n].held, peak: end.peak, heldAtEnd: end.held,
                    recomputed: end.recomputed, formulas: GF.logic.checkpointing.formulas(n, s)};
        })""",
        data["runs"],
    )
    for row in summary:
        run = data["runs"][row["key"]]
        assert row["afterForward"] == run["held"] == row["formulas"]["held"], row
        assert row["recomputed"] == run["recomputed"] == row["formulas"]["recomputed"], row
        assert row["peak"] == row["formulas"]["peak"] and row["heldAtEnd"] == 0, row


def test_checkpointing_controls_set_layers_segments_and_step(page, data):
    widget = page.locator('[data-gf-widget="checkpointing"]')
    status = widget.locator(".gf-status")
    layers, segments, step = widget.locator("input[type=range]").all()
    layers.focus()
    layers.press("Home")
    for _ in range(6):
        layers.press("ArrowRight")
    segments.focus()
    segments.press("Home")
    segments.press("ArrowRight")
    run = data["runs"]["8/2"]
    assert (status.get_attribute("data-layers"), status.get_attribute("data-segments")) == (
        "8",
        "2",
    )
    # a new configuration opens at the end of the forward pass
    assert status.get_attribute("data-step") == "8"
    assert status.get_attribute("data-held") == str(run["held"])
    widget.get_by_role("button", name="Next step").click()
    assert status.get_attribute("data-step") == "9"
    assert "Backward through layer 8" in status.inner_text()
    step.focus()
    step.press("End")
    assert status.get_attribute("data-recomputed") == str(run["recomputed"])
    assert status.get_attribute("data-held") == "0"
    assert status.get_attribute("data-peak") == str(run["held"])
    step.press("Home")
    widget.get_by_role("button", name="Play").click()
    page.wait_for_function(
        "+document.querySelector('[data-gf-widget=checkpointing] .gf-status').dataset.step >= 2"
    )
    widget.get_by_role("button", name="Pause").click()
    assert "a0" in widget.locator("svg.gf-ckpt__cells").get_attribute("aria-label")
