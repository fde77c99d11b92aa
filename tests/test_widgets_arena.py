"""The arena widget (docs/arena.md) in chromium: every control selects the grid cell whose
build-time runs it draws, the FP16 switch changes only the low-precision recipes and labels the
others FP32, the step slider and Play move along the steps, and the runs it holds are those
gradflow_ref.arena.train produces for the same configuration.

The page stores each held-out loss to 4 significant digits (gradflow_site.widgets.rounded), so a
stored loss is within 5e-4 of train()'s, relatively.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
from torch.testing import assert_close

from gradflow_ref.arena import RECIPES, ArenaConfig, train
from tests._browser import open_page

pytestmark = [pytest.mark.build, pytest.mark.browser]

STORED = 5e-4  # rtol of a loss rounded to 4 significant digits
YMAX = 100  # the top of the widget's loss axis (arena.js)


@pytest.fixture(scope="module")
def page(browser, server):
    with open_page(browser, server, "arena/") as (page, record):
        yield page
        assert not record["errors"]


@pytest.fixture(scope="module")
def data(page):
    return json.loads(page.locator('[data-gf-widget="arena"]').get_attribute("data-gf-data"))


def widget(page):
    return page.locator('[data-gf-widget="arena"]')


def move(slider, index: int) -> None:
    """Put a slider over a precomputed list on entry `index` with the keyboard."""
    slider.press("Home")
    for _ in range(index):
        slider.press("ArrowRight")


def drawn(page) -> dict[str, dict[str, str]]:
    """The data-* attributes of every recipe's curve group, by recipe."""
    return snapshot(page)["runs"]


def snapshot(page) -> dict:
    """In one round trip: the status line's data-*, every curve group's data-* (with `cross`,
    the number of inf/NaN marks) and the table's cells."""
    return page.evaluate(
        """() => {
          const fig = document.querySelector('[data-gf-widget="arena"]');
          const runs = [...fig.querySelectorAll('.gf-arena-run')].map(g =>
            [g.dataset.recipe, {...g.dataset, cross: g.querySelectorAll('text').length}]);
          return {
            status: {...fig.querySelector('.gf-status').dataset},
            runs: Object.fromEntries(runs),
            table: [...fig.querySelectorAll('.gf-table tbody tr')].map(
              tr => [...tr.cells].map(td => td.textContent)),
          };
        }"""
    )


def expected_final(run) -> float:
    return math.inf if run["loss"][-1] is None else run["loss"][-1]


def cell_runs(data, index, half: bool) -> dict[str, dict]:
    """The runs the widget should draw: FP16 replaces only the low-precision recipes' runs."""
    i, j, k = index
    bf16, fp16 = data["runs"][i][j][k]
    low = data["low_precision"]
    return {
        name: fp16[r] if half and name in low else bf16[r] for r, name in enumerate(data["recipes"])
    }


def test_arena_widget_leaves_out_a_slider_over_one_value(page, data):
    fig = widget(page)
    for label, key in (("Depth", "depth"), ("Learning rate", "lr"), ("Batch size", "batch_size")):
        shown = fig.get_by_role("slider", name=label).count()
        assert shown == (len(data[key]) > 1), label


def test_arena_widget_every_control_draws_its_cells_runs(page, data):
    fig = widget(page)
    assert len(data["depth"]) == 1, "this test moves the learning-rate and batch sliders only"
    sliders = [fig.get_by_role("slider", name=label) for label in ("Learning rate", "Batch size")]
    fp16 = fig.get_by_role("checkbox", name="FP16 instead of BF16")
    fig.get_by_role("slider", name="Step").press("End")
    depth = data["depth"][0]
    # nested loops move one control per cell: every control takes every value
    for j, lr in enumerate(data["lr"]):
        move(sliders[0], j)
        for k, batch in enumerate(data["batch_size"]):
            move(sliders[1], k)
            for half in (False, True):
                fp16.set_checked(half)
                check_cell(snapshot(page), data, (depth, lr, batch, half), (0, j, k))


def check_cell(shot, data, cell, index):
    depth, lr, batch, half = cell
    status = shot["status"]
    assert [float(status[key]) for key in ("depth", "lr", "batch")] == [depth, lr, batch]
    assert status["fp16"] == str(half).lower() and status["step"] == str(data["steps"])
    runs = cell_runs(data, index, half)
    assert list(shot["runs"]) == list(runs) == list(RECIPES)
    for (name, run), row in zip(runs.items(), shot["table"]):
        shown = shot["runs"][name]
        assert float(shown["final"]) == expected_final(run), (cell, name)
        assert shown["status"] == run["status"], (cell, name)
        assert shown["cross"] == (run["dead"] is not None), (cell, name)
        assert row[0] == name and row[4] == str(run["skipped"]), (cell, row)
        if run["status"] != "NaN/inf":
            assert row[3].endswith(f"({run['status']})"), (cell, row)
        elif run["dead"] is not None:
            assert row[3] == f"weights inf/NaN after step {run['dead']}", (cell, row)


def test_arena_widget_fp16_retrains_only_the_low_precision_recipes(page, data):
    fig = widget(page)
    fp16 = fig.get_by_role("checkbox", name="FP16 instead of BF16")
    fp16.set_checked(False)
    bf16 = snapshot(page)
    fp16.set_checked(True)
    half = snapshot(page)
    low = data["low_precision"]
    assert low == ["mixed", "full"]
    for row_bf, row_half in zip(bf16["table"], half["table"]):
        name = row_bf[0]
        if name in low:
            assert (row_bf[1], row_half[1]) == ("BF16", "FP16"), name
        else:
            # one FP32 run, drawn under either setting and labelled as such
            assert row_bf[1] == row_half[1] == "FP32", name
            assert row_bf[2:] == row_half[2:], name
            assert bf16["runs"][name] == half["runs"][name], name
    fp16.set_checked(False)


@pytest.mark.parametrize(
    "cell",
    [(12, 1.0, 1, True), (12, 0.1, 1, False)],
    ids=lambda c: "depth{}-lr{}-batch{}-{}".format(*c[:3], "fp16" if c[3] else "bf16"),
)
def test_arena_widget_runs_match_train(page, data, cell):
    depth, lr, batch_size, fp16 = cell
    cfg = replace(
        ArenaConfig(),
        steps=data["steps"],
        eval_every=1,
        depth=depth,
        lr=lr,
        batch_size=batch_size,
        fp16=fp16,
    )
    stored = page.evaluate("c => GF.logic.arena.cell(...c)", list(cell))
    for name in RECIPES:
        run, shown = train(cfg, name), stored[name]
        assert shown["status"] == run.status
        assert shown["skipped"] == sum(run.skipped)
        assert shown["dead"] == (None if run.dead_at is None else run.dead_at + 1)
        finite = [v if math.isfinite(v) else None for v in run.eval_loss]
        assert [v is None for v in shown["loss"]] == [v is None for v in finite], name
        assert_close(
            floats([v for v in shown["loss"] if v is not None]),
            [v for v in finite if v is not None],
            rtol=STORED,
            atol=0,
        )


def test_arena_widget_step_slider_draws_the_loss_at_that_step(page, data):
    fig = widget(page)
    move(fig.get_by_role("slider", name="Learning rate"), data["lr"].index(1.0))
    move(fig.get_by_role("slider", name="Batch size"), data["batch_size"].index(1))
    fig.get_by_role("checkbox", name="FP16 instead of BF16").set_checked(True)
    runs = page.evaluate("GF.logic.arena.cell(12, 1.0, 1, true)")
    assert runs["mixed"]["dead"] is not None, "this cell should hold a run that dies"
    step = fig.get_by_role("slider", name="Step")
    step.press("Home")
    for k in range(data["steps"] + 1):
        shown = drawn(page)
        assert widget(page).locator(".gf-status").get_attribute("data-step") == str(k)
        for name, run in runs.items():
            want = json.dumps(run["loss"][k]) if k < len(run["loss"]) else "stopped"
            assert shown[name]["shown"] == want, (k, name)
            assert shown[name]["cross"] == (run["dead"] is not None and k >= run["dead"])
        step.press("ArrowRight")


def test_arena_widget_play_advances_and_pause_stops(page):
    fig = widget(page)
    status = fig.locator(".gf-status")
    fig.get_by_role("slider", name="Step").press("Home")
    play = fig.get_by_role("button", name="Play")
    play.click()
    page.wait_for_function(
        "() => +document.querySelector('[data-gf-widget=arena] .gf-status').dataset.step >= 2"
    )
    pause = fig.get_by_role("button", name="Pause")
    assert pause.get_attribute("aria-pressed") == "true"
    pause.click()
    stopped = status.get_attribute("data-step")
    page.wait_for_timeout(1200)  # more than two frames of 500 ms
    assert status.get_attribute("data-step") == stopped
    assert (
        fig.get_by_role("slider", name="Step")
        .get_attribute("aria-valuetext")
        .startswith(f"{stopped} /")
    )


def floats(points):
    """Nested numbers as floats (JSON gives ints for whole numbers)."""
    return [floats(p) for p in points] if isinstance(points, list) else float(points)


def top(a, b, k):
    """Where the segment from (k - 1, a) to (k, b) crosses YMAX on a log axis."""
    if a is None or b is None:
        return [k, YMAX]
    t = (math.log10(YMAX) - math.log10(a)) / (math.log10(b) - math.log10(a))
    return [k - 1 + t, YMAX]


@pytest.mark.parametrize(
    ("loss", "expected"),
    [
        (
            [1.0, 10.0, 1000.0, 50.0, 0.5],
            [
                {
                    "points": [[0, 1.0], [1, 10.0], top(10.0, 1000.0, 2)],
                    "exit": top(10.0, 1000.0, 2),
                },
                {"points": [top(1000.0, 50.0, 3), [3, 50.0], [4, 0.5]], "exit": None},
            ],
        ),
        (
            [200.0, None, 2.0],
            [{"points": [], "exit": [0, YMAX]}, {"points": [[2, YMAX], [2, 2.0]], "exit": None}],
        ),
        ([0.5, 0.4, 0.3], [{"points": [[0, 0.5], [1, 0.4], [2, 0.3]], "exit": None}]),
    ],
    ids=["exit-and-return", "start-above", "inside"],
)
def test_arena_pieces_clip_curves_at_the_top_on_the_log_axis(page, loss, expected):
    pieces = page.evaluate("l => GF.logic.arena.pieces(l, 99)", loss)
    assert [p["exit"] is None for p in pieces] == [p["exit"] is None for p in expected]
    for got, want in zip(pieces, expected):
        assert_close(floats(got["points"]), floats(want["points"]), rtol=1e-12, atol=0)
        if want["exit"] is not None:
            assert_close(floats(got["exit"]), floats(want["exit"]), rtol=1e-12, atol=0)
