"""Render computed results for a page: inline SVG figures and Markdown tables.

Every function returns a string for an executed block to print: `svg` with `html="1"`, `table`
as Markdown (markdown-exec renders printed Markdown). How a figure becomes SVG text is
gradflow_site/figure_svg.py; its phone rendering, gradflow_site/phone.py.
"""

from __future__ import annotations

from collections.abc import Sequence

from gradflow_site.figure_svg import plain_log_labels, power_label, svg_text
from gradflow_site.phone import narrow_svg

__all__ = ["ALT", "build_machine", "plain_log_ticks", "svg", "table"]

ALT = "@@gf-alt@@"  # a figure's text alternative, filled from its caption (extension.py)


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
            axis.set_major_formatter(FuncFormatter(power_label))


def svg(fig) -> str:
    """Return `fig` as inline, reproducible SVG for an `html="1"` block to print; close it.

    Cropped as savefig(bbox_inches="tight") crops; log axes keep matplotlib's ticks and labels,
    written as plain text (10⁻⁶) rather than mathtext; a wide figure also gets a phone rendering
    (CSS shows one of the two: gradflow.css, .gf-figure__wide / __narrow). Write its caption
    with `/// caption` after the block: the caption's text becomes the figure's text
    alternative (gradflow_site/extension.py).
    """
    import matplotlib.pyplot as plt
    from matplotlib.text import Text

    plain_log_labels(fig)
    wraps = any(t.get_wrap() for t in fig.findobj(Text))  # before a draw adds every tick
    wide = svg_text(fig, ALT, one_draw=not wraps)
    narrow = narrow_svg(fig, ALT)
    plt.close(fig)
    if narrow is None:
        return f'<figure class="gf-figure">{wide}</figure>'
    return (
        f'<figure class="gf-figure"><div class="gf-figure__wide">{wide}</div>'
        f'<div class="gf-figure__narrow">{narrow}</div></figure>'
    )


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
