"""A matplotlib figure as lean SVG text, for a page to inline.

`svg_text` writes the figure cropped as savefig(bbox_inches="tight") crops it, in one draw where
it can be (`tight_svg`), named for screen readers, without what a page pays for and nobody sees
(`lean_svg`). `plain_log_labels` has log axes label their ticks in plain text (10⁻⁶) instead
of mathtext, which is slow to typeset; `power_label` is such a label.
"""

from __future__ import annotations

import io
import math
import re

__all__ = [
    "SUPERSCRIPT",
    "lean_svg",
    "plain_log_labels",
    "plain_math",
    "power_label",
    "svg_text",
    "tight_svg",
]

SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def power_label(value: float, _pos=None) -> str:
    """A log axis' tick label in plain text: 0.01 to 1000 as numbers, other powers as 10⁻⁶."""
    if value <= 0:
        return ""
    exponent = math.log10(value)
    if abs(exponent - round(exponent)) > 1e-9 or -2 <= round(exponent) <= 3:
        return f"{value:g}"
    return "10" + str(round(exponent)).translate(SUPERSCRIPT)


def plain_math(label: str) -> str:
    """A log axis' mathtext tick label as plain text: $\\mathdefault{10^{-6}}$ -> 10⁻⁶,
    $\\mathdefault{2\\times10^{-1}}$ -> 2×10⁻¹; any other label is returned as it is."""
    m = re.fullmatch(r"\$\\mathdefault\{(-?)(.*)\}\$", label)
    if m is None:
        return label
    body = m.group(2).replace(r"\times", "×")
    body = re.sub(r"\^\{(-?\d+)\}", lambda e: e.group(1).translate(SUPERSCRIPT), body)
    if re.search(r"[\\{}^$]", body):
        return label
    return ("−" if m.group(1) else "") + body


def plain_log_labels(fig) -> None:
    """Give every log axis that labels its ticks in mathtext (matplotlib's default) the same
    labels as plain text, which is much faster to draw than mathtext; the ticks, and which of
    them are labelled, stay as matplotlib chose."""
    from matplotlib.ticker import LogFormatterSciNotation

    class PlainLogFormatter(LogFormatterSciNotation):
        def __call__(self, x, pos=None):
            return plain_math(super().__call__(x, pos))

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


def svg_text(fig, label: str, one_draw: bool) -> str:
    text = tight_svg(fig, one_draw)
    text = text[text.index("<svg") :]
    text = re.sub(r"<svg\b", f'<svg role="img" aria-label="{label}"', text, count=1)
    text = re.sub(r"(<svg[^>]*>)", rf"\1<title>{label}</title>", text, count=1)
    return lean_svg(text)


def tight_svg(fig, one_draw: bool) -> str:
    """The SVG of savefig(bbox_inches="tight"), in one draw where it can be.

    savefig's "tight" draws the figure twice: once to measure it, once to write it. Here the
    figure is written uncropped, a last artist (_tight_box) measures the same bounding box at
    the end of that one draw, and the SVG's size and viewBox crop to it, padded by
    savefig.pad_inches: the same picture, drawn once. Text that wraps is laid out against the
    figure's width, which "tight" narrows to the crop before its second draw; a figure whose
    crop is narrower than the figure and whose text wraps takes savefig's two draws
    (`one_draw` False). (The phone rendering is fitted to its crop first: one draw.)
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


def lean_svg(text: str) -> str:
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
