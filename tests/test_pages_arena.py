"""Builders of docs/arena.md (gradflow_site/pages/arena.py): words, digits and the widget grid."""

from __future__ import annotations

import html
import json
import re
from dataclasses import replace

import pytest
import torch

from gradflow_ref.arena import RECIPES, ArenaConfig, train
from gradflow_site.pages import arena as page
from gradflow_site.widgets import rounded

SMALL = {"depth": [3], "lr": [0.1, 1.0], "batch_size": [4]}
START = {"depth": 3, "lr": 0.1, "batch_size": 4}


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


def test_names_lists_recipes_with_a_status():
    runs = {name: train(replace(ArenaConfig(), steps=2, lr=1.0), name) for name in RECIPES}
    listed = page.names(runs, "learns", "worse than start", "NaN/inf")
    assert listed == ", ".join(list(RECIPES)[:-1]) + " and " + list(RECIPES)[-1]
    assert page.names({"clip": runs["clip"]}, runs["clip"].status) == "clip"
    assert page.names(runs, "no such status") == "none"


def test_names_rejects_no_status():
    with pytest.raises(ValueError, match="at least one status"):
        page.names({})


def test_grid_cell_holds_train_runs(small_grid):
    cfg = replace(ArenaConfig(), steps=2, eval_every=1, depth=3, lr=1.0, batch_size=4)
    for name in ("baseline", "clip", "mixed"):
        run = train(cfg, name)
        cell = small_grid.at(3, 1.0, 4)[name]
        expected = [v if v == v and abs(v) != float("inf") else None for v in run.eval_loss]
        assert cell["loss"] == rounded(expected)
        assert cell["status"] == run.status


def test_grid_fp16_changes_only_the_low_precision_recipes(small_grid):
    for bf, hf in small_grid.pairs():
        for name, recipe in RECIPES.items():
            if not recipe.mixed:
                assert bf[name] == hf[name]
    cfg = replace(ArenaConfig(), steps=2, eval_every=1, depth=3, lr=0.1, batch_size=4, fp16=True)
    assert small_grid.at(3, 0.1, 4, fp16=True)["mixed"]["status"] == train(cfg, "mixed").status


def test_grid_counts_agree_with_its_cells(small_grid):
    every = small_grid.every()
    assert len(every) == 2 * len(small_grid.pairs()) == 4
    assert small_grid.ckpt_same() == sum(c["ckpt"] == c["baseline"] for c in every)
    assert small_grid.learned("full") == sum(c["full"]["status"] == "learns" for c in every)
    assert len(small_grid.skips()) == len(small_grid.pairs())


def test_grid_rejects_unknown_axes():
    with pytest.raises(ValueError, match="`axes` must have the keys"):
        page.grid(ArenaConfig(), {"depth": [3]})


def test_widget_keeps_the_arena_data_contract(small_grid):
    out = page.widget(small_grid, START)
    data = json.loads(html.unescape(re.search(r'data-gf-data="([^"]*)"', out).group(1)))
    assert set(data) == {"depth", "lr", "batch_size", "steps", "recipes", "start", "runs"}
    assert data["recipes"] == list(RECIPES) and data["start"] == START
    assert data["runs"] == json.loads(json.dumps(small_grid.cells))
    assert "arena" in out and "<svg" in out


def test_ends_names_every_recipe_of_the_start_cell(small_grid):
    text = page.ends(small_grid, START)
    assert text.count(" ends at ") == len(RECIPES)
