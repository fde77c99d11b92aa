"""Builders of docs/arena.md (gradflow_site/pages/arena.py): ranges over seeds, which
differences exceed them, the table, the figure and the widget's payload."""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import dataclass

import pytest

from gradflow_site.pages import arena as page

NAN = math.nan


def log(val: float, losses=(5.5, 4.0), skipped: int = 0) -> list[dict]:
    """A train.py log of len(losses) steps ending with held-out loss `val`."""
    steps = [
        {"step": i, "loss": v, "skipped": i < skipped, "loss_scale": 1.0}
        for i, v in enumerate(losses)
    ]
    steps[-1]["val_loss"] = val
    return steps


def seeds(*vals: float) -> list[list[dict]]:
    return [log(v) for v in vals]


@dataclass
class Cfg:  # the Config fields the widget reads
    lr: float
    micro_batch: int
    steps: int = 2
    precision: str = "fp32"


RECIPES = {"none": {}, "clip": {"max_norm": 1.0}, "fp16": {"precision": "fp16"}}


def panel(*ranges) -> dict:
    return {name: seeds(*vals) for name, vals in zip(RECIPES, ranges)}


def test_final_reads_the_last_val_loss():
    assert page.final(log(3.25)) == 3.25


def test_final_turns_inf_into_nan():
    assert math.isnan(page.final(log(math.inf)))


def test_final_rejects_a_log_without_val_loss():
    with pytest.raises(ValueError, match="no `val_loss`"):
        page.final([{"step": 0, "loss": 5.5}])


def test_nan_count_counts_seeds_that_ended_nan():
    assert page.nan_count(seeds(3.0, NAN, math.inf)) == 2


def test_spread_gives_lowest_and_highest():
    assert page.spread(seeds(3.479, 3.443, 3.451)) == "3.44–3.48"


def test_spread_gives_one_value_when_all_round_alike():
    assert page.spread(seeds(3.4431, 3.4429)) == "3.44"


def test_spread_counts_nan_seeds():
    assert page.spread(seeds(NAN, NAN)) == "NaN ×2"
    assert page.spread(seeds(3.0, NAN, 4.0)) == "3–4, NaN ×1"


def test_spread_rejects_no_logs():
    with pytest.raises(ValueError, match="`logs` is empty"):
        page.spread([])


def test_relation_says_whether_ranges_overlap():
    low, high, wide = seeds(0.1, 0.2), seeds(0.3, 0.4), seeds(0.15, 0.35)
    assert page.relation(low, high) == "below"
    assert page.relation(high, low) == "above"
    assert page.relation(wide, high) == "overlapping"


def test_relation_counts_a_nan_run_as_infinite():
    assert page.relation(seeds(NAN, NAN), seeds(40.0, 50.0)) == "above"
    assert page.relation(seeds(NAN, 30.0), seeds(40.0, 50.0)) == "overlapping"


def test_listing_joins_with_and():
    assert page.listing([]) == "no recipe"
    assert page.listing(["a"]) == "a"
    assert page.listing(["a", "b", "c"]) == "a, b and c"


def test_apart_names_recipes_beyond_the_spread():
    runs = panel((3.4, 3.5), (3.45, 3.6), (3.0, 3.1))
    assert page.apart(runs) == "fp16"
    assert page.apart(runs, side="above") == "no recipe"
    assert page.apart(runs, against="fp16", side="above") == "none and clip"


def test_apart_rejects_an_unknown_recipe():
    with pytest.raises(ValueError, match="`against` must be one of"):
        page.apart(panel((3.4,)), against="ckpt")


def test_apart_rejects_an_unknown_side():
    with pytest.raises(ValueError, match="`side` must be"):
        page.apart(panel((3.4,)), side="left")


def test_changes_writes_config_fields():
    assert page.changes({}) == "—"
    assert page.changes({"precision": "fp16", "loss_scaling": False}) == (
        "precision='fp16', loss_scaling=False"
    )


def test_table_has_a_range_and_a_verdict_per_condition():
    runs = {"reference": panel((3.4, 3.5), (3.45, 3.6), (3.0, 3.1))}
    rows = page.table(runs, RECIPES).splitlines()
    assert rows[0] == "| recipe | Config changes | reference | vs none |"
    assert rows[2] == "| none | — | 3.4–3.5 | – |"
    assert rows[3] == "| clip | max_norm=1.0 | 3.45–3.6 | within the spread |"
    assert rows[4] == "| fp16 | precision='fp16' | 3–3.1 | lower |"


def test_table_says_no_run_where_a_condition_lacks_a_recipe():
    runs = {"reference": panel((3.4,), (3.4,), (3.4,)), "other": panel((3.0,), (3.1,))}
    fp16 = page.table(runs, RECIPES).splitlines()[-1]
    assert fp16.endswith("| no run | – |")


def test_figure_draws_one_panel_per_condition_and_marks_nan_seeds():
    runs = {"reference": panel((3.4, 3.5), (3.45,), (3.0,)), "hot": panel((20.0,), (NAN, 30.0))}
    fig = page.figure(runs)
    assert [ax.get_title() for ax in fig.axes] == ["reference", "hot"]
    notes = [t.get_text() for t in fig.axes[1].texts]
    assert notes == ["NaN ×1"]


def widget_cells():
    return [
        (Cfg(0.03, 8), panel((3.4, 3.5), (3.4, 3.5), (3.4, 3.5))),
        (Cfg(3.0, 8), panel((20.0, 30.0), (25.0, 35.0), (NAN, NAN))),
        (Cfg(0.03, 2), panel((3.6,), (3.6,), (3.6,))),
        (Cfg(3.0, 2), panel((22.0,), (23.0,), (NAN,))),
    ]


def test_widget_data_orders_the_axes():
    data = page.widget_data(widget_cells(), [0, 1], RECIPES)
    assert data["lr"] == [0.03, 3.0] and data["batch"] == [2, 8]
    assert data["recipes"] == list(RECIPES) and data["steps"] == 2


def test_widget_data_holds_none_for_seeds_not_run():
    data = page.widget_data(widget_cells(), [0, 1], RECIPES)
    lr, batch = data["lr"].index(0.03), data["batch"].index(2)
    assert data["runs"][lr][batch][1] is None
    assert data["runs"][lr][batch][0] is not None
    assert all(cell is not None for cell in data["runs"][lr][data["batch"].index(8)])


def test_widget_data_summarises_each_run():
    data = page.widget_data(widget_cells(), [0, 1], RECIPES)
    hot = data["runs"][data["lr"].index(3.0)][data["batch"].index(8)][0]
    assert hot[0] == {"loss": [5.5, 4.0], "val": 20.0, "skipped": 0}
    assert hot[2]["val"] is None


def test_widget_data_writes_nan_losses_as_none():
    cells = widget_cells()
    cells[0][1]["none"][0] = log(NAN, losses=(5.5, NAN))
    data = page.widget_data(cells, [0, 1], RECIPES)
    run = data["runs"][0][data["batch"].index(8)][0][0]
    assert run["loss"] == [5.5, None] and run["val"] is None


def test_widget_data_gives_each_recipe_its_precision():
    data = page.widget_data(widget_cells(), [0, 1], RECIPES)
    assert data["precision"] == ["fp32", "fp32", "fp16"]


def test_widget_data_rejects_a_missing_pair():
    with pytest.raises(ValueError, match=r"no runs for \(lr, batch\)"):
        page.widget_data(widget_cells()[:3], [0, 1], RECIPES)


def test_widget_keeps_the_data_contract():
    data = page.widget_data(widget_cells(), [0, 1], RECIPES)
    start = {"lr": 3.0, "batch": 8, "seed": 0}
    out = page.widget(data, start)
    stored = json.loads(html.unescape(re.search(r'data-gf-data="([^"]*)"', out).group(1)))
    assert stored == {**json.loads(json.dumps(data)), "start": start}
    assert "<svg" in out


def test_widget_rejects_a_start_without_a_run():
    data = page.widget_data(widget_cells(), [0, 1], RECIPES)
    with pytest.raises(ValueError, match="has no run"):
        page.widget(data, {"lr": 0.03, "batch": 2, "seed": 1})
