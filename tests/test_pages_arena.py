"""Builders of docs/arena.md (gradflow_site/pages/arena.py): ranges over seeds, which recipes lie
apart from the full recipe, seed-by-seed differences, the table and the figure, on small records
made here; and what the page says in words about the committed record holds in it."""

from __future__ import annotations

import math
import statistics

import pytest

from gradflow_site.pages import arena as page

RECIPES = {"full": {}, "no-clip": {"max_norm": 0.0}, "fp16": {"precision": "fp16"}}


def _record(finals: dict[str, list[float | None]], same=(), clipped=3, skipped=0) -> dict:
    """A race record: per recipe, one held-out loss per seed (None: inf or NaN)."""
    runs = [
        {
            "recipe": name,
            "seed": seed,
            "val": val,
            "loss": [5.0, 4.0 + seed, 3.0],
            "grad_norm": [2.0, 1.0, 0.5],
            "clipped": clipped,
            "skipped": skipped,
            "loss_scale": 1.0,
            "same_as_full": name in same,
        }
        for name, vals in finals.items()
        for seed, val in enumerate(vals)
    ]
    config = {"recipes": {k: RECIPES[k] for k in finals}, "seeds": [0, 1, 2], "every": 10}
    return {"name": "arena", "config": config, "runs": runs}


def test_finals_orders_by_seed_with_nan_for_a_diverged_run():
    rec = _record({"full": [2.0, 2.1, None]})
    rec["runs"].reverse()
    assert page.finals(rec, "full")[:2] == [2.0, 2.1] and math.isnan(page.finals(rec, "full")[2])


def test_runs_names_an_unknown_recipe():
    with pytest.raises(ValueError, match="no runs of recipe 'ckpt'"):
        page.runs(_record({"full": [2.0]}), "ckpt")


def test_verdict_compares_whole_ranges():
    rec = _record({"full": [2.0, 2.1, 2.2], "no-clip": [2.3, 2.5, 2.4], "fp16": [2.15, 1.9, 2.0]})
    assert page.verdict(rec, "no-clip") == "above"
    assert page.verdict(rec, "fp16") == "overlapping"
    assert page.verdict(rec, "full", against="no-clip") == "below"


def test_verdict_calls_a_run_with_a_nan_seed_diverged_not_above():
    rec = _record({"full": [2.0, 2.1, 2.2], "no-clip": [None, 2.5, 2.4]})
    assert page.verdict(rec, "no-clip") == "diverged"
    assert page.apart(rec, "above") == [] and page.apart(rec, "diverged") == ["no-clip"]


def test_apart_rejects_an_unknown_side():
    with pytest.raises(ValueError, match="`side` must be one of"):
        page.apart(_record({"full": [2.0]}), "left")


def test_paired_and_every_seed_compare_seed_by_seed():
    rec = _record({"full": [2.0, 2.5, 2.2], "no-clip": [2.1, 2.55, 2.3], "fp16": [2.0, 2.4, 2.3]})
    assert page.paired(rec, "no-clip") == pytest.approx([0.1, 0.05, 0.1])
    assert page.verdict(rec, "no-clip") == "overlapping"  # ranges overlap ...
    assert page.every_seed(rec, "higher") == ["no-clip"]  # ... yet every seed is higher
    assert page.every_seed(rec, "lower") == []
    assert page.gap(rec, "fp16") == pytest.approx(0.1)


def test_differences_say_identical_runs_are_identical():
    assert page.differences([0.0, 0.0]) == "0, every seed"
    assert page.differences([-0.0003, 0.033]) == "-0.00030 to +0.033"
    assert page.differences([0.3, 0.3]) == "+0.30"


def test_same_needs_every_seed_identical():
    rec = _record({"full": [2.0, 2.1], "no-clip": [2.0, 2.1], "fp16": [2.0, 2.1]}, same=["fp16"])
    rec["runs"][-1]["same_as_full"] = True
    assert page.same(rec) == ["fp16"]
    rec["runs"][-2]["same_as_full"] = False
    assert page.same(rec) == []


def test_spread_gives_one_value_when_every_seed_had_it():
    assert page.spread([46, 40, 56], ".0f") == "46 (40-56)"
    assert page.spread([0, 0, 0], ".0f") == "0"


def test_listing_joins_with_and():
    assert page.listing([]) == "none"
    assert page.listing(["a", "b", "c"]) == "a, b and c"


def test_table_gives_each_recipe_its_range_verdict_and_seed_differences():
    rec = _record({"full": [2.0, 2.1, 2.2], "no-clip": [2.3, 2.5, 2.4], "fp16": [2.0, 2.1, 2.2]})
    rows = page.table(rec).splitlines()
    assert rows[0].startswith("| recipe | held-out loss | vs full | minus full, same seed |")
    assert rows[2] == "| full | 2.100 (2.000-2.200) | – | – | 3 | 0 |"
    assert rows[3] == "| no-clip | 2.400 (2.300-2.500) | higher | +0.20 to +0.40 | 3 | 0 |"
    assert rows[4] == "| fp16 | 2.100 (2.000-2.200) | overlaps | 0, every seed | 3 | 0 |"


def test_table_counts_diverged_seeds():
    rec = _record({"full": [2.0, 2.1, 2.2], "no-clip": [2.3, None, None]})
    assert "| no-clip | 2.300, inf/NaN ×2 | diverged |" in page.table(rec)


def test_curves_are_the_median_over_seeds():
    rec = _record({"full": [2.0, 2.1, 2.2]})
    assert page.curves(rec, "full") == [5.0, 5.0, 3.0]
    assert page.curves(rec, "full", "grad_norm") == [2.0, 1.0, 0.5]


def test_figure_draws_every_seed_and_the_chosen_curves():
    import matplotlib.pyplot as plt

    rec = _record({"full": [2.0, 2.1, 2.2], "no-clip": [2.3, 2.5, 2.4], "fp16": [2.0, 2.1, None]})
    fig = page.figure(rec, ["no-clip"])
    seeds, curves = fig.axes
    assert [len(line.get_xdata()) for line in seeds.lines] == [3, 3, 2]  # NaN not drawn
    assert [t.get_text() for t in seeds.get_yticklabels()] == list(RECIPES)
    assert [line.get_label() for line in curves.lines] == ["full", "no-clip"]
    assert list(curves.lines[0].get_xdata()) == [10, 20, 30]
    plt.close(fig)


def test_byte_entropy_is_below_a_uniform_guess():
    assert 0 < page.byte_entropy() < math.log(256)


# --- what docs/arena.md says in words about the committed record holds in it


@pytest.fixture(scope="module")
def rec():
    return page.record()


def test_page_claims_about_what_mattered_hold(rec):
    # warmup: the only range apart from full's; clipping: higher with every seed, ranges overlap
    assert page.apart(rec, "above") == ["no-warmup"] and page.apart(rec, "below") == []
    assert page.apart(rec, "diverged") == []
    assert page.verdict(rec, "no-clip") == "overlapping"
    assert min(page.finals(rec, "no-clip")) < max(page.finals(rec, "full"))
    assert page.every_seed(rec, "higher") == ["no-warmup", "no-clip", "fp16-no-scaler"]
    # no-warmup stalled near the byte frequencies' loss, above it, while full fell through it
    stall = page.curves(rec, "no-warmup")[1:6]
    assert 0 < min(stall) - page.byte_entropy() < 0.05 and max(stall) - min(stall) < 0.05
    assert page.curves(rec, "full")[5] < page.byte_entropy() < page.curves(rec, "full")[1]
    assert len(rec["config"]["seeds"]) == 5  # "once in 16 races", "one race in 126"


def test_page_claims_about_what_did_not_hold(rec):
    others = ("fp32", "bf16-pure", "fp16", "accum")
    assert all(page.verdict(rec, n) == "overlapping" for n in (*others, "fp16-no-scaler"))
    largest = max(page.gap(rec, n) for n in others)
    assert (
        page.gap(rec, "fp16-no-scaler") < largest < statistics.median(page.paired(rec, "no-clip"))
    )
    assert page.same(rec) == ["ckpt"] and page.gap(rec, "ckpt") == 0.0
    assert sum(page.total(rec, "fp16-no-scaler", "skipped")) == 0
    assert (
        max(page.total(rec, "fp16", "skipped")) > 0
        and sum(page.total(rec, "no-warmup", "skipped")) == 0
    )
