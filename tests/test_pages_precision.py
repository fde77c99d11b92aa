"""Builders of docs/precision.md (gradflow_site/pages/precision.py): held against torch."""

from __future__ import annotations

import html
import json
import math
import re

import matplotlib.pyplot as plt
import torch

from gradflow_ref.precision import FORMATS
from gradflow_site.pages import precision as page

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
