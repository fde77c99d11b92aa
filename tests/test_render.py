"""render.svg: a desktop rendering, and a phone rendering whose text stays readable."""

from __future__ import annotations

import io
import re
import xml.etree.ElementTree as ET

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from gradflow_site.figure_svg import lean_svg, plain_math, power_label, tight_svg  # noqa: E402
from gradflow_site.phone import PHONE_INCHES, PHONE_MIN_PT  # noqa: E402
from gradflow_site.render import plain_log_ticks, svg  # noqa: E402
from tests._site import ROOT  # noqa: E402


def sizes(svg_text: str) -> list[float]:
    return [float(x) for x in re.findall(r"font(?:-size)?:\s*([\d.]+)px", svg_text)]


def test_svg_adds_a_phone_rendering_with_readable_text():
    fig, axes = plt.subplots(1, 4, figsize=(8, 2.5))
    for ax in axes:
        ax.plot([1, 2, 3], label="a line")
        ax.legend(fontsize=6, ncols=3)
        ax.set_title("a rather long title for such a small panel")
    out = svg(fig)
    wide, narrow = re.findall(r'<div class="gf-figure__(?:wide|narrow)">(<svg.*?</svg>)', out, re.S)
    assert min(sizes(wide)) < PHONE_MIN_PT  # the desktop image is left as drawn
    assert min(sizes(narrow)) >= PHONE_MIN_PT
    width = float(re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+)', narrow).group(1))
    assert width <= PHONE_INCHES * 72 * 1.1  # points
    ids = set(re.findall(r'id="([^"]+)"', wide)) & set(re.findall(r'id="([^"]+)"', narrow))
    assert not ids, f"the two renderings share element ids: {sorted(ids)[:3]}"


def test_svg_keeps_one_rendering_when_the_figure_already_reads_on_a_phone():
    fig, ax = plt.subplots(figsize=(3.2, 2.4))
    ax.plot([1, 2])
    ax.tick_params(labelsize=10)
    out = svg(fig)
    assert "gf-figure__narrow" not in out and out.count("<svg") == 1


def test_plain_log_ticks_label_decades_without_mathtext():
    assert [power_label(v) for v in (1e-6, 0.01, 1, 1000, 1e4, 2.0**7)] == [
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
    svg_text = svg(fig)
    assert "10⁻⁴" in svg_text or "10⁻⁵" in svg_text  # labels are text, not typeset glyphs
    assert not ax.xaxis.get_minorticklocs().size
    assert ax.yaxis.get_major_formatter().__class__.__name__ != "FuncFormatter"  # linear: kept


def _box(svg_text: str) -> list[float]:
    root = re.search(r"<svg\b[^>]*>", svg_text).group(0)
    size = [float(re.search(rf'{k}="([\d.]+)pt"', root).group(1)) for k in ("width", "height")]
    return size + [float(v) for v in re.search(r'viewBox="([^"]+)"', root).group(1).split()[2:]]


def test_one_draw_crops_the_figure_as_savefig_tight_does():
    fig, axes = plt.subplots(1, 2, figsize=(7, 2.5))
    for ax in axes:
        ax.plot([1, 10, 100], label="a line")
        ax.set_yscale("log")
        ax.set_ylabel("a label left of the axes")
    fig.legend(loc="outside right upper")  # beyond the figure's right edge
    fig.suptitle("a title")
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    draws = []
    fig.canvas.mpl_connect("draw_event", lambda event: draws.append(event))
    one = tight_svg(fig, one_draw=True)
    assert len(draws) == 1  # savefig's "tight" draws twice
    assert _box(one) == pytest.approx(_box(buf.getvalue()), abs=0.01)
    x, y = (float(v) for v in re.search(r'viewBox="([^"]+)"', one).group(1).split()[:2])
    assert x > 0 and y < 0  # cropped on the left; the suptitle's pad reaches above the figure


def test_wrapped_text_keeps_savefigs_layout():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_title("a title long enough to wrap at the edge of a narrow figure", wrap=True)
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight")
    out = svg(fig)
    assert out.count("<text") == buf.getvalue().count("<text")
    assert _box(out) == pytest.approx(_box(buf.getvalue()), abs=0.01)


def test_lean_svg_keeps_every_drawn_element_and_drops_the_rest():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([1, 2, 3], "o-", label="a line")
    ax.legend()
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    full = buf.getvalue()
    lean = lean_svg(full[full.index("<svg") :])
    ET.fromstring(lean)  # well formed: every kept <g> still has its </g>
    for tag in ("path", "use", "text", "clipPath"):
        assert lean.count(f"<{tag}") == full.count(f"<{tag}"), tag
    assert "<!--" not in lean and "<style" not in lean
    assert not re.search(r'<g id="[^"]*">', lean)  # groups that only carried an id
    assert lean.count("<g") < full.count("<g") // 3
    refs = set(re.findall(r'(?:url\(#|href="#)([^)"]+)', lean))
    assert refs and refs <= set(re.findall(r'\bid="([^"]+)"', lean))
    # the strokes matplotlib's dropped style element asked for come from the site's CSS
    css = (ROOT / "docs" / "assets" / "gradflow.css").read_text(encoding="utf-8")
    assert (
        ".gf-figure svg *, .gf-widget svg * { stroke-linejoin: round; stroke-linecap: butt; }"
        in css
    )


def test_log_axes_keep_matplotlibs_labels_as_plain_text():
    assert [
        plain_math(s)
        for s in (
            r"$\mathdefault{10^{-6}}$",
            r"$\mathdefault{2\times10^{-1}}$",
            r"$\mathdefault{-10^{3}}$",
            r"$\mathdefault{2^{6}}$",
            r"$\mathdefault{0.5}$",
            r"$\sqrt{N}$",
        )
    ] == ["10⁻⁶", "2×10⁻¹", "−10³", "2⁶", "0.5", r"$\sqrt{N}$"]

    def labels(fig):  # the labels of the ticks drawn (those inside the axes' limits)
        fig.canvas.draw()
        axes = [axis for a in fig.axes for axis in (a.xaxis, a.yaxis)]
        return [[t.label1.get_text() for t in axis._update_ticks()] for axis in axes]

    def figure():
        fig, (left, right) = plt.subplots(1, 2, figsize=(6, 2.5))
        left.semilogy([1e-6, 1, 1e6])
        right.loglog([0.3, 0.5, 0.9], [2, 3, 5], label=r"$1/\sqrt{N}$")  # minor ticks labelled
        right.set_xscale("log", base=2)
        right.legend()
        return fig

    mathtext, plain = figure(), figure()
    expected = [plain_math(t) for axes in labels(mathtext) for t in axes if t]
    out = svg(plain)
    wide = re.search(r'<div class="gf-figure__wide">(<svg.*?</svg>)', out, re.S).group(1)
    shown = re.findall(r"<text\b[^>]*>([^<]*)</text>", wide)
    assert expected and all(label in shown for label in expected), (expected, shown)
    assert any("⁻" in t for t in expected) and any("×" in t for t in expected), expected
    assert "mathdefault" not in out
    assert "1/\\sqrt" not in out  # mathtext that is not a tick label is still typeset
