"""Builders of docs/arena.md (gradflow_site/pages/arena.py): words, ranges and the widget grid."""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import replace

import pytest
import torch

from gradflow_ref.arena import RECIPES, ArenaConfig, Run, train
from gradflow_site.pages import arena as page
from gradflow_site.widgets import rounded

SMALL = {"depth": [3], "lr": [0.1, 1.0], "batch_size": [4]}
START = {"depth": 3, "lr": 0.1, "batch_size": 4}


def ended(*finals: float, start: float = 1.0) -> list[Run]:
    """Runs, one per seed, that scored `start` before training and ended at each of `finals`."""
    runs = []
    for final in finals:
        run = Run("baseline", RECIPES["baseline"], ArenaConfig(), torch.float32)
        run.loss, run.eval_loss = [start, final], [start, final]
        runs.append(run)
    return runs


@pytest.fixture(scope="module")
def small_grid():
    return page.grid(ArenaConfig(), SMALL, steps=2)


def test_same_digits_bf16_max_agrees_with_fp32_max_to_two_digits():
    bf16, fp32 = torch.finfo(torch.bfloat16).max, torch.finfo(torch.float32).max
    assert page.same_digits(bf16, fp32) == 2


def test_same_digits_counts_leading_significant_digits():
    assert page.same_digits(1.0, 2.0) == 0
    assert page.same_digits(1.23, 1.24) == 2
    assert page.same_digits(0.5, 0.5) == 17


def test_same_digits_rejects_non_finite():
    with pytest.raises(ValueError, match="`a` and `b` must be finite"):
        page.same_digits(float("inf"), 1.0)


def test_names_lists_recipes_whose_every_seed_has_a_status():
    panel = {"baseline": ended(0.5, 0.6), "clip": ended(0.5, 2.0), "accum": ended(0.4, 0.3)}
    assert page.names(panel, "learns") == "baseline and accum"
    assert page.names(panel, "learns", "worse than start") == "baseline, clip and accum"
    assert page.names(panel, "NaN/inf") == "none"


def test_names_accepts_single_runs():
    runs = {name: train(replace(ArenaConfig(), steps=2, lr=1.0), name) for name in RECIPES}
    listed = page.names(runs, "learns", "worse than start", "NaN/inf")
    assert listed == ", ".join(list(RECIPES)[:-1]) + " and " + list(RECIPES)[-1]
    assert page.names({"clip": runs["clip"]}, runs["clip"].status) == "clip"


def test_names_rejects_no_status():
    with pytest.raises(ValueError, match="at least one status"):
        page.names({})


def test_names_rejects_a_panel_of_non_runs():
    with pytest.raises(TypeError, match="names: pass a Run or a non-empty list of Runs"):
        page.names({"clip": [0.5]}, "learns")


def test_count_counts_seeds_with_a_status():
    assert page.count(ended(0.5, 2.0, 3.0), "worse than start") == 2
    assert page.count(ended(0.5)[0], "learns") == 1


def test_spread_gives_lowest_and_highest():
    assert page.spread([0.379, 0.221, 0.234]) == "0.221–0.379"
    assert page.spread([65536.0, 65536.0], "g") == "65536"


def test_spread_rejects_no_values():
    with pytest.raises(ValueError, match="`values` is empty"):
        page.spread([])


def test_relation_says_whether_ranges_overlap():
    low, high, wide = ended(0.1, 0.2), ended(0.3, 0.4), ended(0.15, 0.35)
    assert page.relation(low, high) == "entirely below"
    assert page.relation(high, low) == "entirely above"
    assert page.relation(wide, high) == "overlapping"


def test_relation_counts_a_dead_run_as_infinite():
    dead = ended(0.2)[0]
    dead.dead_at, dead.eval_loss[-1] = 1, math.nan
    assert dead.status == "NaN/inf"
    assert page.relation(ended(0.5, 0.9), [dead, *ended(0.3)]) == "overlapping"
    assert page.relation(ended(0.5, 0.9), [dead]) == "entirely below"


def test_below_names_recipes_beyond_the_spread():
    panel = {"baseline": ended(0.3, 0.4), "clip": ended(0.35, 0.5), "accum": ended(0.1, 0.2)}
    assert page.below(panel, "baseline") == "accum"
    assert page.below(panel, "accum") == "none"


def test_below_rejects_an_unknown_recipe():
    with pytest.raises(ValueError, match="below: `recipe` must be one of"):
        page.below({"clip": ended(0.5)}, "baseline")


def test_grid_cell_holds_train_runs(small_grid):
    cfg = replace(ArenaConfig(), steps=2, eval_every=1, depth=3, lr=1.0, batch_size=4)
    for name in ("baseline", "clip", "mixed"):
        run = train(cfg, name)
        cell = small_grid.at(3, 1.0, 4)[name]
        expected = [v if math.isfinite(v) else None for v in run.eval_loss]
        assert cell["loss"] == rounded(expected)
        assert cell["status"] == run.status


def test_grid_fp16_holds_only_the_low_precision_recipes(small_grid):
    assert page.LOW_PRECISION == ["mixed", "full"]
    for _, hf in small_grid.pairs():
        assert list(hf) == page.LOW_PRECISION
    halves = [cell[1] for by_lr in small_grid.cells for by_batch in by_lr for cell in by_batch]
    for half in halves:
        assert [s is None for s in half] == [name not in page.LOW_PRECISION for name in RECIPES]
    cfg = replace(ArenaConfig(), steps=2, eval_every=1, depth=3, lr=0.1, batch_size=4, fp16=True)
    assert small_grid.at(3, 0.1, 4, fp16=True)["mixed"]["status"] == train(cfg, "mixed").status


def test_grid_counts_agree_with_its_cells(small_grid):
    pairs = small_grid.pairs()
    assert len(pairs) == len(small_grid.positions()) == 2
    assert small_grid.ckpt_same() == sum(bf["ckpt"] == bf["baseline"] for bf, _ in pairs)
    assert small_grid.skips() == [hf["full"]["skipped"] for _, hf in pairs]
    dead = [hf for _, hf in pairs if hf["mixed"]["status"] == "NaN/inf"]
    assert [hf for _, hf in small_grid.fp16_dead()] == dead


def test_grid_rejects_unknown_axes():
    with pytest.raises(ValueError, match="`axes` must have the keys"):
        page.grid(ArenaConfig(), {"depth": [3]})


def test_widget_keeps_the_arena_data_contract(small_grid):
    out = page.widget(small_grid, START)
    data = json.loads(html.unescape(re.search(r'data-gf-data="([^"]*)"', out).group(1)))
    assert set(data) == {
        "depth",
        "lr",
        "batch_size",
        "steps",
        "recipes",
        "low_precision",
        "start",
        "runs",
    }
    assert data["recipes"] == list(RECIPES) and data["start"] == START
    assert data["low_precision"] == page.LOW_PRECISION
    assert data["runs"] == json.loads(json.dumps(small_grid.cells))
    assert "arena" in out and "<svg" in out


def test_ends_names_every_recipe_of_the_start_cell(small_grid):
    text = page.ends(small_grid, START)
    assert text.count(" ends at ") == len(RECIPES)
