"""render.svg: a desktop rendering, and a phone rendering whose text stays readable."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gradflow_site.render import PHONE_INCHES, PHONE_MIN_PT, svg  # noqa: E402


def sizes(svg_text: str) -> list[float]:
    return [float(x) for x in re.findall(r"font(?:-size)?:\s*([\d.]+)px", svg_text)]


def test_svg_adds_a_phone_rendering_with_readable_text():
    fig, axes = plt.subplots(1, 4, figsize=(8, 2.5))
    for ax in axes:
        ax.plot([1, 2, 3], label="a line")
        ax.legend(fontsize=6, ncols=3)
        ax.set_title("a rather long title for such a small panel")
    out = svg(fig, alt="Four panels.")
    wide, narrow = re.findall(r'<div class="gf-figure__(?:wide|narrow)">(<svg.*?</svg>)', out, re.S)
    assert min(sizes(wide)) < PHONE_MIN_PT  # the desktop image is left as drawn
    assert min(sizes(narrow)) >= PHONE_MIN_PT
    width = float(re.search(r'viewBox="0 0 ([\d.]+)', narrow).group(1))
    assert width <= PHONE_INCHES * 72 * 1.1  # points
    ids = set(re.findall(r'id="([^"]+)"', wide)) & set(re.findall(r'id="([^"]+)"', narrow))
    assert not ids, f"the two renderings share element ids: {sorted(ids)[:3]}"


def test_svg_keeps_one_rendering_when_the_figure_already_reads_on_a_phone():
    fig, ax = plt.subplots(figsize=(3.2, 2.4))
    ax.plot([1, 2])
    ax.tick_params(labelsize=10)
    out = svg(fig, alt="One line.")
    assert "gf-figure__narrow" not in out and out.count("<svg") == 1


def test_plain_log_ticks_label_decades_without_mathtext():
    from gradflow_site.render import _power_label, plain_log_ticks

    assert [_power_label(v) for v in (1e-6, 0.01, 1, 1000, 1e4, 2.0**7)] == [
        "10⁻⁶",
        "0.01",
        "1",
        "1000",
        "10⁴",
        "128",
    ]
    fig, ax = plt.subplots()
    ax.plot([1e-5, 1e5], [1, 2])
    ax.set_xscale("log")
    plain_log_ticks(ax)
    svg_text = svg(fig, alt="a line")
    assert "10⁻⁴" in svg_text or "10⁻⁵" in svg_text  # labels are text, not typeset glyphs
    assert not ax.xaxis.get_minorticklocs().size
    assert ax.yaxis.get_major_formatter().__class__.__name__ != "FuncFormatter"  # linear: kept
