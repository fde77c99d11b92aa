"""The arena widget (docs/arena.md) in chromium: every control selects the cell whose
build-time runs it draws, a seed the build did not run says so and draws nothing, the step
slider and Play move along the steps, and the runs it holds are those snippets/train.py
produces for the same configuration.

The page stores each loss to 4 significant digits (gradflow_site.widgets.rounded), so a stored
loss is within 5e-4 of train()'s, relatively.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from dataclasses import replace

import pytest
from torch.testing import assert_close

from gradflow_site.labs import sections
from tests._browser import open_page
from tests._site import ROOT

pytestmark = [pytest.mark.build, pytest.mark.browser]

STORED = 5e-4  # rtol of a loss rounded to 4 significant digits
YMAX = 300  # the top of the widget's loss axis (arena.js)
CONTROLS = ("Learning rate", "Batch", "Seed")


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


def snapshot(page) -> dict:
    """In one round trip: the status line's data-* and text, every curve group's data-* (with
    `cross`, the number of inf/NaN marks) and the table's cells."""
    return page.evaluate(
        """() => {
          const fig = document.querySelector('[data-gf-widget="arena"]');
          const runs = [...fig.querySelectorAll('.gf-arena-run')].map(g =>
            [g.dataset.recipe, {...g.dataset, cross: g.querySelectorAll('text').length}]);
          const status = fig.querySelector('.gf-status');
          return {
            status: {...status.dataset, text: status.textContent},
            runs: Object.fromEntries(runs),
            table: [...fig.querySelectorAll('.gf-arena-tablewrap tbody tr')].map(
              tr => [...tr.cells].map(td => td.textContent)),
          };
        }"""
    )


def test_arena_widget_every_control_draws_its_cells_runs(page, data):
    fig = widget(page)
    sliders = [fig.get_by_role("slider", name=label) for label in CONTROLS]
    fig.get_by_role("slider", name="Step").press("End")
    # nested loops move one control per cell: every control takes every value
    for i, lr in enumerate(data["lr"]):
        move(sliders[0], i)
        for j, batch in enumerate(data["batch"]):
            move(sliders[1], j)
            for k, seed in enumerate(data["seeds"]):
                move(sliders[2], k)
                check_cell(snapshot(page), data, (lr, batch, seed), data["runs"][i][j][k])


def check_cell(shot, data, cell, runs):
    lr, batch, seed = cell
    status = shot["status"]
    assert [float(status["lr"]), int(status["batch"]), int(status["seed"])] == list(cell)
    if runs is None:
        assert status["ran"] == "false" and shot["runs"] == {} and shot["table"] == []
        assert "no run" in status["text"], cell
        return
    assert status["ran"] == "true" and status["step"] == str(data["steps"])
    assert list(shot["runs"]) == data["recipes"]
    for name, run, row, precision in zip(data["recipes"], runs, shot["table"], data["precision"]):
        shown = shot["runs"][name]
        assert shown["val"] == ("nan" if run["val"] is None else str(run["val"])), (cell, name)
        assert row[0] == name and row[1] == precision and row[4] == str(run["skipped"])
        assert shown["cross"] == (None in run["loss"]), (cell, name)


def test_arena_widget_says_no_run_for_a_seed_the_build_did_not_run(page, data):
    cells = [
        (i, j, k)
        for i in range(len(data["lr"]))
        for j in range(len(data["batch"]))
        for k in range(len(data["seeds"]))
        if data["runs"][i][j][k] is None
    ]
    assert cells, "the page should hold a cell without a run"
    i, j, k = cells[0]
    fig = widget(page)
    for label, index in zip(CONTROLS, (i, j, k)):
        move(fig.get_by_role("slider", name=label), index)
    shot = snapshot(page)
    assert shot["runs"] == {} and "no run" in shot["status"]["text"]
    ran = [s for s, run in zip(data["seeds"], data["runs"][i][j]) if run is not None]
    assert f"seed {', '.join(map(str, ran))} only" in shot["status"]["text"]
    assert fig.locator(".gf-arena-tablewrap").text_content() == "No run at this seed."


@pytest.fixture(scope="module")
def arena_run():
    """The snippet's `run(cfg, recipe, seed)` and `base`, with snippets/train.py's train."""
    code = dict(sections(ROOT / "snippets" / "arena.py"))
    spec = importlib.util.spec_from_file_location("train", ROOT / "snippets" / "train.py")
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    namespace: dict = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "train", train)
        exec(code["setup"] + "\n" + code["recipes"], namespace)
        exec(code["race"].split("\nconditions =")[0], namespace)
    return namespace["run"], namespace["base"]


@pytest.mark.parametrize("recipe", ["none", "fp16", "fp16-scaled"])
def test_arena_widget_runs_match_train(page, data, arena_run, recipe):
    run, base = arena_run
    lr, batch, seed = max(data["lr"]), base.micro_batch, data["seeds"][0]
    stored = page.evaluate("c => GF.logic.arena.cell(...c)", [lr, batch, seed])[recipe]
    log = run(replace(base, lr=lr, micro_batch=batch), recipe, seed)
    losses = [s["loss"] if math.isfinite(s["loss"]) else None for s in log]
    assert [v is None for v in stored["loss"]] == [v is None for v in losses]
    assert_close(
        [float(v) for v in stored["loss"] if v is not None],
        [v for v in losses if v is not None],
        rtol=STORED,
        atol=0,
    )
    assert stored["skipped"] == sum(s["skipped"] for s in log)
    val = log[-1]["val_loss"]
    assert (stored["val"] is None) == (not math.isfinite(val))


def test_arena_widget_step_slider_draws_the_loss_at_that_step(page, data):
    fig = widget(page)
    move(fig.get_by_role("slider", name="Learning rate"), data["lr"].index(max(data["lr"])))
    move(fig.get_by_role("slider", name=CONTROLS[1]), len(data["batch"]) - 1)
    move(fig.get_by_role("slider", name="Seed"), 0)
    runs = page.evaluate(
        "c => GF.logic.arena.cell(...c)", [max(data["lr"]), data["batch"][-1], data["seeds"][0]]
    )
    assert any(None in run["loss"] for run in runs.values()), "this cell should hold a NaN run"
    step = fig.get_by_role("slider", name="Step")
    step.press("Home")
    for k in range(1, data["steps"] + 1):
        shown = snapshot(page)
        assert shown["status"]["step"] == str(k)
        for name, run in runs.items():
            assert shown["runs"][name]["shown"] == json.dumps(run["loss"][k - 1]), (k, name)
            dead = None if None not in run["loss"] else run["loss"].index(None) + 1
            assert shown["runs"][name]["cross"] == (dead is not None and k >= dead), (k, name)
        step.press("ArrowRight")


def test_arena_widget_play_advances_and_pause_stops(page):
    fig = widget(page)
    status = fig.locator(".gf-status")
    fig.get_by_role("slider", name="Step").press("Home")
    play = fig.get_by_role("button", name="Play")
    play.click()
    page.wait_for_function(
        "() => +document.querySelector('[data-gf-widget=arena] .gf-status').dataset.step >= 3"
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
            [5.0, 50.0, 3000.0, 50.0, 5.0],
            [
                {
                    "points": [[0, 5.0], [1, 50.0], top(50.0, 3000.0, 2)],
                    "exit": top(50.0, 3000.0, 2),
                },
                {"points": [top(3000.0, 50.0, 3), [3, 50.0], [4, 5.0]], "exit": None},
            ],
        ),
        (
            [500.0, None, 2.0],
            [{"points": [], "exit": [0, YMAX]}, {"points": [[2, YMAX], [2, 2.0]], "exit": None}],
        ),
        ([5.5, 4.0, 3.4], [{"points": [[0, 5.5], [1, 4.0], [2, 3.4]], "exit": None}]),
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
