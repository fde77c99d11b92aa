"""Builders of docs/precision.md (gradflow_site/pages/precision.py): held against torch; and what
the page's sentences say about the numbers snippets/precision.py prints."""

from __future__ import annotations

import html
import json
import math
import re
import runpy

import matplotlib.pyplot as plt
import pytest
import torch

from gradflow_ref.precision import FORMATS, ulp
from gradflow_site.pages import precision as page
from tests._site import ROOT


@pytest.fixture(scope="module")
def shown():
    """The names the page's shown code leaves behind, run as the page runs it (about 8 s)."""
    return runpy.run_path(str(ROOT / "snippets" / "precision.py"))


INTS = {1: torch.uint8, 2: torch.int16, 4: torch.int32}


def data_of(out: str) -> dict:
    return json.loads(html.unescape(re.search(r'data-gf-data="([^"]*)"', out).group(1)))


def test_formats_match_torch_finfo():
    for f, row in zip(FORMATS.values(), page.formats()):
        info = torch.finfo(f.dtype)
        assert row["name"] == f.name and row["bits"] == info.bits
        assert row["max"] == info.max and row["min_normal"] == info.tiny


def test_formats_nan_code_is_torchs_nan():
    for f, row in zip(FORMATS.values(), page.formats()):
        code = torch.tensor(row["nan_code"], dtype=torch.int64)
        # the unsigned pattern, as the format's own integer view
        bits = (code - 2**f.bits if row["nan_code"] >= 2 ** (f.bits - 1) else code).to(
            INTS[f.bytes]
        )
        assert math.isnan(bits.view(f.dtype).float().item()), f.name


def test_bits_widget_keeps_the_data_contract():
    out = page.bits_widget()
    data = data_of(out)
    assert set(data) == {"formats", "start"} and data["start"] == "0.1"
    assert [f["name"] for f in data["formats"]] == list(FORMATS)
    assert 'data-gf-needs="precision"' in out


def test_bits_widget_static_table_shows_torchs_bits_of_the_start_value():
    out = page.bits_widget(0.1)
    code = torch.tensor(0.1).view(torch.int32).item()
    pattern = format(code, "032b")
    assert f"{pattern[0]} {pattern[1:9]} {pattern[9:]}" in out
    assert f"{torch.tensor(0.1, dtype=torch.bfloat16).item():.10g}" in out


def test_numberline_widget_keeps_the_data_contract():
    data = data_of(page.numberline_widget())
    assert set(data) == {"formats", "lo", "hi", "start"}
    assert (data["lo"], data["hi"], data["start"]) == (-9, 5, 3e-5)


def test_numberline_static_table_shows_what_torch_stores():
    out = page.numberline_widget(values=(70000.0, 1e-8))
    assert "inf (overflow)" in out  # FP16 and E5M2 overflow at 70000
    assert f"{torch.tensor(70000.0).bfloat16().item():g}" in out
    assert torch.tensor(1e-8).half().item() == 0 and "0 (underflow)" in out


def test_svg_returns_the_figure_as_svg():
    fig, ax = plt.subplots()
    ax.plot([0, 1])
    assert "<svg" in page.svg(fig)


def test_number_line_figure_draws_each_formats_spacing():
    fig = page.number_line_figure(centre=1000.0, half_width=10.0)
    texts = [t.get_text() for t in fig.axes[0].texts]
    plt.close(fig)
    assert texts == [f"spacing {ulp(1000.0, n):g}" for n in ("bfloat16", "float16", "float32")]


def test_number_line_figure_rejects_non_positive_half_width():
    with pytest.raises(ValueError, match="`half_width` must be positive"):
        page.number_line_figure(half_width=0.0)


def test_stall_figure_labels_each_kind_of_run_once():
    runs = {(True, 1): ([1.0, 0.5], []), (True, 2): ([1.0, 0.6], []), (False, 1): ([1.0, 0.4], [])}
    fig = page.stall_figure(runs)
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    plt.close(fig)
    assert len(labels) == 3 and sum(not label.startswith("_") for label in labels) == 2


def test_stall_figure_rejects_no_runs():
    with pytest.raises(ValueError, match="at least one"):
        page.stall_figure({})


@pytest.mark.long(seconds=8)
def test_precision_snippet_pure_bf16_still_learns_in_every_seed(shown):
    pure = [losses for (is_pure, _), (losses, _) in shown["runs"].items() if is_pure]
    assert all(losses[100] > losses[-1] for losses in pure)


def test_precision_snippet_pure_bf16_loses_more_late_updates_than_fp32(shown):
    lost = shown["late_lost"]
    assert min(lost[True, s] for s in shown["seeds"]) > 10 * max(
        lost[False, s] for s in shown["seeds"]
    )


def test_precision_snippet_autocast_state_is_what_its_tensors_hold(shown):
    totals = shown["totals"]
    assert totals["autocast"] == shown["per_param"]
    extra = totals["BF16 copy"] - totals["autocast"]
    assert extra == FORMATS["bfloat16"].bytes


def test_format_table_rows_match_torch_finfo():
    rows = [line.split(" | ") for line in page.format_table().splitlines()[2:]]
    for row, dtype in zip(rows, (torch.float32, torch.bfloat16, torch.float16)):
        info = torch.finfo(dtype)
        assert row[2] == f"{info.max:.4g}" and row[3] == f"{info.tiny:.3g}"


def test_format_table_rejects_unknown_format():
    with pytest.raises(ValueError, match="`names` must be keys of FORMATS"):
        page.format_table(("float64",))
