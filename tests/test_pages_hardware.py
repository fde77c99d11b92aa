"""Builders of docs/hardware.md (gradflow_site/pages/hardware.py): tables, figures, widget data."""

from __future__ import annotations

import html
import json
import re

import pytest

from gradflow_ref import roofline
from gradflow_ref.hardware import GPUS, ON_CHIP, peak_flops, ridge_point
from gradflow_site.pages import hardware as page


def _rows(markdown: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in markdown.splitlines()]


def test_spec_table_has_dense_and_sparse_columns_from_the_module():
    rows = _rows(page.spec_table())
    head = rows[0]
    h100 = dict(zip(head, next(r for r in rows if r[0] == "H100 SXM")))
    assert float(h100["BF16/FP16 dense"]) == peak_flops("H100 SXM", "bf16") / 1e12
    assert float(h100["FP8 2:4 sparse"]) == peak_flops("H100 SXM", "fp8", sparse=True) / 1e12
    assert "FP64 2:4 sparse" not in head
    a100 = dict(zip(head, next(r for r in rows if r[0] == "A100 80GB SXM")))
    assert a100["FP8 dense"] == "none"
    assert all(f"]({card.source})" in page.spec_table() for card in GPUS.values())


def test_ridge_table_rounds_ridge_points():
    rows = _rows(page.ridge_table())
    h200 = dict(zip(rows[0], next(r for r in rows if r[0] == "H200 SXM")))
    assert h200["BF16/FP16 (FLOP/byte)"] == f"{ridge_point('H200 SXM', 'bf16'):.0f}"


def test_hierarchy_table_links_sources_and_says_not_published():
    text = page.hierarchy_table()
    rows = {r[0]: r[1:] for r in _rows(text)}
    assert rows["L2 cache"][list(GPUS).index("H100 SXM")].startswith("[50 MB](")
    assert rows["L2 cache"][list(GPUS).index("H200 SXM")] == "not published"
    assert rows["L1 / shared bandwidth"][list(GPUS).index("H100 SXM")] == "not published"
    assert ON_CHIP["A100 80GB SXM"].sram_bandwidth_source in text


def test_roofline_data_agrees_with_gradflow_ref():
    data = page.roofline_data()
    assert set(data["gpus"]) == set(GPUS)
    assert "fp8" not in data["gpus"]["A100 80GB SXM"]["peaks"]
    preset = data["presets"][data["start"]["preset"]]
    mm = roofline.Matmul(preset["m"], preset["n"], preset["k"], data["dtypeBytes"]["bf16"])
    gpu = data["gpus"][data["start"]["gpu"]]
    assert gpu["peaks"]["bf16"] / gpu["bandwidth"] == pytest.approx(
        roofline.matmul_bound(mm, data["start"]["gpu"]).ridge
    )


def test_roofline_widget_embeds_its_data_and_a_static_figure():
    out = page.roofline_widget()
    assert 'data-gf-widget="roofline"' in out and "<svg" in out
    payload = json.loads(html.unescape(re.search(r'data-gf-data="([^"]*)"', out).group(1)))
    assert payload["presets"][0]["n"] == 11008


def test_break_it_widget_rounds_runs_and_rejects_ragged_input():
    runs = {"fp32": ([1.0, 0.5], [0.0, 0.0]), "fp16": ([1.0, 0.5], [0.25, 0.5])}
    out = page.break_it_widget(runs)
    payload = json.loads(html.unescape(re.search(r'data-gf-data="([^"]*)"', out).group(1)))
    assert [r["mode"] for r in payload["runs"]] == ["fp32", "fp16"]
    assert payload["runs"][1]["bad"] == [0.25, 0.5]
    with pytest.raises(ValueError, match="equally long"):
        page.break_it_widget({"fp32": ([1.0], [0.0, 0.0])})
