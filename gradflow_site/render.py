"""Render computed results for a page: inline SVG figures, Markdown tables and quizzes.

Every function returns a string for an executed block to print: `svg` with `html="1"`,
`table` and `quiz` as Markdown (markdown-exec renders printed Markdown). `FIGURE_ALT` holds the
descriptions of figures that an executed lab shows too, keyed "snippet:section": the chapter
passes it to `svg` and gradflow_site/lab_html.py gives it to the lab's image, so both read alike.
"""

from __future__ import annotations

import html
import io
import math
import re
from collections.abc import Sequence

__all__ = ["FIGURE_ALT", "build_machine", "plain_log_ticks", "svg", "table", "quiz"]

FIGURE_ALT = {
    # what the figure draws, not what the runs did (that is computed: the chapter appends it)
    "arena:figure": (
        "Four panels of held-out loss against optimizer step on a log scale, one per condition: "
        "reference, learning rate 1.0, batch 1 and FP16 (mixed and full only). Each recipe has a "
        "line, the median of three seeds, and a shaded band from the lowest seed to the highest; "
        "the checkpointing line is dashed with crosses over a thick baseline line. A cross at the "
        "top of a panel marks the step after which a seed's weights became inf or NaN; the ranges "
        "of the final losses are in the failure-mode table that follows."
    ),
}


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def _power_label(value: float, _pos=None) -> str:
    """A log axis' tick label in plain text: 0.01 to 1000 as numbers, other powers as 10⁻⁶."""
    if value <= 0:
        return ""
    exponent = math.log10(value)
    if abs(exponent - round(exponent)) > 1e-9 or -2 <= round(exponent) <= 3:
        return f"{value:g}"
    return "10" + str(round(exponent)).translate(_SUPERSCRIPT)


def plain_log_ticks(ax) -> None:
    """Label the log-scaled axes of `ax` in plain text and drop their minor ticks.

    Matplotlib's default log labels are mathtext ($10^{3}$) and every decade gets eight minor
    ticks; typesetting those, for the page's figure and again for its phone variant, is most of
    the figure's rendering time. Plain labels (superscript digits) read the same.
    """
    from matplotlib.ticker import FuncFormatter, NullLocator

    for axis in (ax.xaxis, ax.yaxis):
        if axis.get_scale() == "log":
            axis.set_minor_locator(NullLocator())
            axis.set_major_formatter(FuncFormatter(_power_label))


def svg(fig, alt: str | None = None, caption: str | None = None) -> str:
    """Return `fig` as an inline, reproducible SVG figure with a text alternative, and close it.

    Cropped as savefig(bbox_inches="tight") crops; log axes keep matplotlib's ticks and labels,
    written as plain text (10⁻⁶) rather than mathtext; a wide figure also gets a phone rendering.

    Args:
        fig: a matplotlib Figure.
        alt: what the figure shows (read by screen readers). Leave it out in chapters: the
            caption paragraph written after the block (`{: .gf-caption }`) names the figure
            (gradflow_site/captions.py).
        caption: optional visible caption under the figure (Markdown is not rendered).

    Raises:
        ValueError: `alt` is given but empty.
    """
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    from gradflow_site.captions import ALT_PLACEHOLDER

    if alt is None:
        alt = ALT_PLACEHOLDER
    if not alt.strip():
        raise ValueError("svg: `alt` must describe what the figure shows, got an empty string.")
    label = html.escape(alt.strip(), quote=True)
    _plain_log_labels(fig)
    wraps = any(t.get_wrap() for t in fig.findobj(Text))  # before a draw adds every tick
    wide = _svg_text(fig, label, one_draw=not wraps)
    narrow = _narrow_svg(fig, label)
    plt.close(fig)
    cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
    if narrow is None:
        return f'<figure class="gf-figure">{wide}{cap}</figure>'
    # the phone variant: same data, fewer inches, text no smaller than PHONE_MIN_PT; CSS shows
    # one of the two (gradflow.css, .gf-figure__wide / __narrow)
    return (
        f'<figure class="gf-figure"><div class="gf-figure__wide">{wide}</div>'
        f'<div class="gf-figure__narrow">{narrow}</div>{cap}</figure>'
    )


def _plain_math(label: str) -> str:
    """A log axis' mathtext tick label as plain text: $\\mathdefault{10^{-6}}$ -> 10⁻⁶,
    $\\mathdefault{2\\times10^{-1}}$ -> 2×10⁻¹; any other label is returned as it is."""
    m = re.fullmatch(r"\$\\mathdefault\{(-?)(.*)\}\$", label)
    if m is None:
        return label
    body = m.group(2).replace(r"\times", "×")
    body = re.sub(r"\^\{(-?\d+)\}", lambda e: e.group(1).translate(_SUPERSCRIPT), body)
    if re.search(r"[\\{}^$]", body):
        return label
    return ("−" if m.group(1) else "") + body


def _plain_log_labels(fig) -> None:
    """Give every log axis that labels its ticks in mathtext (matplotlib's default) the same
    labels as plain text, which is much faster to draw than mathtext; the ticks, and which of
    them are labelled, stay as matplotlib chose."""
    from matplotlib.ticker import LogFormatterSciNotation

    class PlainLogFormatter(LogFormatterSciNotation):
        def __call__(self, x, pos=None):
            return _plain_math(super().__call__(x, pos))

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for which in ("major", "minor"):
                fmt = getattr(axis, f"get_{which}_formatter")()
                if type(fmt) is LogFormatterSciNotation:
                    plain = PlainLogFormatter(
                        base=fmt._base,
                        labelOnlyBase=fmt.labelOnlyBase,
                        minor_thresholds=fmt.minor_thresholds,
                        linthresh=fmt._linthresh,
                    )
                    getattr(axis, f"set_{which}_formatter")(plain)


# A 390 px phone leaves about 350 CSS px for a figure. 3.6 in (259 pt) is drawn at its natural
# 4/3 px per pt there, so 9 pt text is 12 CSS px: 11 px or more even if the tight bounding
# box adds a tenth to the width.
PHONE_INCHES = 3.6
PHONE_MIN_PT = 9.0


def _svg_text(fig, label: str, one_draw: bool) -> str:
    text = _tight_svg(fig, one_draw)
    text = text[text.index("<svg") :]
    text = re.sub(r"<svg\b", f'<svg role="img" aria-label="{label}"', text, count=1)
    text = re.sub(r"(<svg[^>]*>)", rf"\1<title>{label}</title>", text, count=1)
    return _lean_svg(text)


def _tight_svg(fig, one_draw: bool) -> str:
    """The SVG of savefig(bbox_inches="tight"), in one draw where it can be.

    savefig's "tight" draws the figure twice: once to measure it, once to write it. Here the
    figure is written uncropped, a last artist (_tight_box) measures the same bounding box at
    the end of that one draw, and the SVG's size and viewBox crop to it, padded by
    savefig.pad_inches: the same picture, drawn once. Text that wraps
    (the phone renderings' titles) is laid out against the cropped figure savefig draws, so
    such a figure takes savefig's two draws (`one_draw` False).
    """
    import matplotlib

    buf = io.StringIO()
    # Date=None and the rc file's svg.hashsalt make two builds byte-identical
    if not one_draw:
        fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
        return buf.getvalue()
    box = _tight_box()
    fig.add_artist(box)
    try:
        fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches=None)
        height = fig.get_size_inches()[1]
    finally:
        box.remove()
    crop = box.inches.padded(matplotlib.rcParams["savefig.pad_inches"])
    x, y, w, h = (72 * v for v in (crop.x0, height - crop.y1, crop.width, crop.height))
    text, n = re.subn(
        r'(<svg\b[^>]*?) width="[^"]*" height="[^"]*" viewBox="[^"]*"',
        rf'\1 width="{w:.2f}pt" height="{h:.2f}pt" viewBox="{x:.2f} {y:.2f} {w:.2f} {h:.2f}"',
        buf.getvalue(),
        count=1,
    )
    if n != 1:  # pragma: no cover - matplotlib changed how it writes the root element
        raise RuntimeError("svg: matplotlib's SVG root has no width, height and viewBox")
    return text


def _tight_box():
    """An artist drawn last (zorder inf, outside the layout) whose `inches` is then the
    figure's tight bounding box, measured with the renderer that writes the figure, as
    savefig's "tight" measures it."""
    from matplotlib.artist import Artist

    class TightBox(Artist):
        def __init__(self) -> None:
            super().__init__()
            self.set_zorder(math.inf)
            self.set_in_layout(False)
            self.inches = None

        def draw(self, renderer) -> None:
            self.inches = self.get_figure(root=True).get_tightbbox(renderer)

    return TightBox()


_GROUP = re.compile(r'<g id="([^"]*)">|<g\b[^>]*?/>|<g\b|</g>')


def _lean_svg(text: str) -> str:
    """Drop what a page pays for and nobody sees: matplotlib's XML comments, the groups that
    only carry an unreferenced id (a third of an SVG's elements: one per tick, line, label),
    and its `*{stroke-linejoin...}` style element, which in an HTML page styles every SVG on
    it (gradflow.css sets the same strokes on figures and widgets only)."""
    text = re.sub(r"<!--.*?-->\s*", "", text, flags=re.S)
    text = re.sub(r"<defs>\s*<style[^>]*>\*\{[^}]*\}</style>\s*</defs>\s*", "", text)
    referenced = set(re.findall(r'(?:url\(#|href="#)([^)"]+)', text))
    out, keep, pos = [], [], 0
    for m in _GROUP.finditer(text):
        out.append(text[pos : m.start()])
        pos = m.end()
        token = m.group(0)
        if token == "</g>":
            if keep.pop():
                out.append(token)
        elif token.endswith("/>"):
            out.append(token)
        elif m.group(1) is not None and m.group(1) not in referenced:
            keep.append(False)
        else:
            keep.append(True)
            out.append(token)
    out.append(text[pos:])
    return "".join(out)


def _narrow_svg(fig, label: str) -> str | None:
    """Return a phone-width rendering of `fig` with text at PHONE_MIN_PT or more, or None.

    None when the figure is already narrow enough. Axes laid out in one row of three or more
    are rearranged two to a row, so each panel keeps a readable width.
    """
    from matplotlib.text import Text

    width, height = fig.get_size_inches()
    small = [t for t in fig.findobj(Text) if t.get_text() and t.get_fontsize() < PHONE_MIN_PT]
    if width <= PHONE_INCHES + 0.25 and not small:
        return None
    tall = max(height * 1.1, _two_per_row(fig))
    for text in small:
        text.set_fontsize(PHONE_MIN_PT)
    _phone_text(fig)
    _fit_phone_width(fig, min(width, PHONE_INCHES), tall)
    # the two renderings sit in one page: every element id of this one gets a prefix
    text = _svg_text(fig, label, one_draw=False)  # _phone_text wraps titles and labels
    text = re.sub(r'\bid="([^"]+)"', r'id="phone-\1"', text)
    return re.sub(r'(url\(#|href="#)([^)"]+)', r"\1phone-\2", text)


def _two_per_row(fig) -> float:
    """Put panels laid out in three or more columns two to a row, in reading order.

    Returns the height (inches) the new rows need, or 0 when the layout stays.
    """
    axes = [ax for ax in fig.axes if ax.get_subplotspec() is not None]
    spans = [ax.get_subplotspec() for ax in axes]
    cols = max((sp.colspan.stop for sp in spans), default=1)
    if cols < 3 or not all(len(sp.colspan) == 1 and len(sp.rowspan) == 1 for sp in spans):
        return 0.0

    def reading_order(ax):
        spec = ax.get_subplotspec()
        return spec.rowspan.start, spec.colspan.start

    order = sorted(axes, key=reading_order)
    n_rows = -(-len(order) // 2)
    grid = fig.add_gridspec(n_rows, 2)
    for i, ax in enumerate(order):
        ax.set_subplotspec(grid[i // 2, i % 2])
    return 2.0 * n_rows


def _phone_text(fig) -> None:
    """Wrap titles and labels at the figure's edge; legends in two columns at most; tick
    labels at PHONE_MIN_PT or more."""
    for ax in fig.axes:  # titles and labels wrap at the figure's edge instead of widening it
        for text in (ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label):
            text.set_wrap(True)
    for text in fig.texts:
        text.set_wrap(True)
    for ax in fig.axes:  # a legend of three or more columns: two on a phone
        legend = ax.get_legend()
        if legend is not None and getattr(legend, "_ncols", 1) > 2:
            ax.legend(
                handles=legend.legend_handles,
                labels=[t.get_text() for t in legend.get_texts()],
                ncols=2,
                loc=legend._loc,
                title=legend.get_title().get_text() or None,
                fontsize=max(PHONE_MIN_PT, legend.get_texts()[0].get_fontsize()),
            )
    for ax in fig.axes:  # tick labels are made at draw time, at the size tick_params holds
        for axis, which in (("x", ax.xaxis), ("y", ax.yaxis)):
            labels = which.get_ticklabels()
            if labels and labels[0].get_fontsize() < PHONE_MIN_PT:
                ax.tick_params(axis=axis, labelsize=PHONE_MIN_PT)


def _fit_phone_width(fig, width: float, tall: float) -> None:
    """Size `fig` to `width` x `tall` inches and lay it out so its saved image is that wide."""
    import warnings

    fig.set_size_inches(width, tall)
    with warnings.catch_warnings():
        # tight_layout warns on axes it cannot fit (colorbars, insets); the figure still renders
        warnings.simplefilter("ignore")
        fig.tight_layout()
        # labels and legends outside the axes widen the saved (tight) image: narrow the figure
        # by that much, twice at most, so the image itself is PHONE_INCHES wide
        for _ in range(2):
            extra = fig.get_tightbbox(fig.canvas.get_renderer()).width - PHONE_INCHES
            if extra <= 0.05:
                break
            fig.set_size_inches(max(1.5, fig.get_size_inches()[0] - extra), tall)
            fig.tight_layout()


def table(
    headers: Sequence[str], rows: Sequence[Sequence[object]], align: str | None = None
) -> str:
    """Return a Markdown table.

    Args:
        headers: column titles.
        rows: one sequence of cells per row, each as long as `headers`; cells are str()-ed.
        align: one of "l", "r", "c" per column ("lr" for two columns); left by default.

    Raises:
        ValueError: a row's length or `align`'s length differs from the number of headers.
    """
    n = len(headers)
    align = align or "l" * n
    if len(align) != n or set(align) - set("lrc"):
        raise ValueError(
            f"table: `align` must have one of l, r, c per column ({n}), got {align!r}."
        )
    rule = {"l": ":--", "r": "--:", "c": ":-:"}
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(rule[a] for a in align) + "|"]
    for i, row in enumerate(rows):
        if len(row) != n:
            raise ValueError(f"table: row {i} has {len(row)} cells, expected {n}: {row!r}.")
        lines.append("| " + " | ".join(str(c).replace("|", r"\|") for c in row) + " |")
    return "\n".join(lines) + "\n"


def quiz(
    question: str, choices: Sequence[tuple[str, str]], answer: int, title: str = "Question"
) -> str:
    """Return a quiz as Markdown: the question, then one collapsible block per choice.

    Each choice opens to its feedback, which says whether it is right and explains why, so a
    reader who picks a wrong answer learns as much as one who picks the right one.

    Args:
        question: the question (Markdown).
        choices: (choice text, explanation) pairs; the explanation is shown when opened.
        answer: index of the correct choice.
        title: the block's title.

    Raises:
        ValueError: fewer than two choices, or `answer` out of range.
    """
    if len(choices) < 2:
        raise ValueError(f"quiz: `choices` needs at least two entries, got {len(choices)}.")
    if not 0 <= answer < len(choices):
        raise ValueError(
            f"quiz: `answer` must index `choices` (0..{len(choices) - 1}), got {answer!r}."
        )
    out = [f'!!! question "{title}"', "", f"    {question}", ""]
    for i, (text, why) in enumerate(choices):
        verdict = "**Correct.**" if i == answer else "**Not this one.**"
        title = f"{chr(65 + i)}. {text}".replace('"', "&quot;")
        out += [f'    ??? quiz "{title}"', "", f"        {verdict} {why}", ""]
    return "\n".join(out)


def build_machine() -> str:
    """Return what a timing on this page was measured on: CPU model, torch threads, torch.

    Example: "Intel(R) Xeon(R) Processor @ 2.50GHz, 1 thread, torch 2.13.0".
    """
    import platform
    from pathlib import Path

    import torch

    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    threads = torch.get_num_threads()
    return f"{model}, {threads} thread{'s' if threads != 1 else ''}, torch {torch.__version__}"
