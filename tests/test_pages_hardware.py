"""Builders of docs/hardware.md (gradflow_site/pages/hardware.py): tables, figures, widget data;
and what the page's sentences say about the numbers snippets/hardware.py prints."""

from __future__ import annotations

import html
import json
import re
import runpy

import pytest

from gradflow_ref import roofline
from gradflow_ref.hardware import GPUS, ON_CHIP, peak_flops, ridge_point
from gradflow_site.pages import hardware as page
from tests._site import ROOT


@pytest.fixture(scope="module")
def shown():
    """The names the page's shown code leaves behind, run as the page runs it (about 5 s)."""
    return runpy.run_path(str(ROOT / "snippets" / "hardware.py"))


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


def test_hierarchy_table_gives_the_a100_l2_bandwidth_from_the_ampere_article():
    rows = {r[0]: r[1:] for r in _rows(page.hierarchy_table())}
    a100, h100 = (
        rows["L2 read bandwidth"][list(GPUS).index(n)] for n in ("A100 80GB SXM", "H100 SXM")
    )
    assert a100.startswith("[5120 bytes per clock, 7.2 TB/s at 1410 MHz](")
    assert ON_CHIP["A100 80GB SXM"].source in a100
    assert h100 == "not published"


def test_attention_sram_is_the_shared_memory_a_kernel_can_take():
    assert page.ATTENTION_SRAM_KIB == {"A100 80GB SXM": 164, "H100 SXM": 228}


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


def test_roofline_7b_mlp_matmul_is_memory_bound_at_one_token_on_every_gpu():
    one = roofline.Matmul(1, 11008, 4096)
    for name in GPUS:
        b = roofline.matmul_bound(one, name, "bf16")
        assert b.bound == "memory" and b.attainable_flops < 0.01 * peak_flops(name, "bf16")


def test_roofline_7b_mlp_matmul_is_compute_bound_at_4096_tokens_on_every_gpu():
    many = roofline.Matmul(4096, 11008, 4096)
    assert all(roofline.matmul_bound(many, name).bound == "compute" for name in GPUS)


@pytest.mark.long(seconds=6)
def test_fp8_snippet_e4m3_is_more_precise_for_activations(shown):
    r = shown["results"]
    assert r["activations", "e4m3"]["current"][0] < r["activations", "e5m2"]["current"][0]


def test_fp8_snippet_e4m3_flushes_more_gradients_than_activations_and_e5m2(shown):
    r = shown["results"]
    flushed = r["gradients", "e4m3"]["current"][1]
    assert r["activations", "e4m3"]["current"][1] < flushed
    assert r["gradients", "e5m2"]["current"][1] < flushed


def test_fp8_snippet_delayed_flushes_most_and_1x128_least_gradients(shown):
    flushed = {name: zero for name, (_, zero) in shown["results"]["gradients", "e4m3"].items()}
    assert min(flushed, key=flushed.get) == "1x128"
    assert max(flushed, key=flushed.get) == "delayed"


def test_fp8_snippet_gradient_amax_falls_so_history_sets_too_small_a_scale(shown):
    amax = shown["amax"]
    assert amax[0] > amax[-1] and shown["too_small"] > (len(amax) - 1) / 2
