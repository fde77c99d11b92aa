"""Render computed results for a page: inline SVG figures, Markdown tables and quizzes.

Every function returns a string for an executed block to print: `svg` with `html="1"`,
`table` and `quiz` as Markdown (markdown-exec renders printed Markdown). `FIGURE_ALT` holds the
descriptions of figures that an executed lab shows too, keyed "snippet:section": the chapter
passes it to `svg` and gradflow_site/lab_html.py gives it to the lab's image, so both read alike.
"""

from __future__ import annotations

import html
import io
import re
from collections.abc import Sequence

__all__ = ["FIGURE_ALT", "build_machine", "svg", "table", "quiz"]

FIGURE_ALT = {
    # what the figure draws, not what the runs did (that is computed: the chapter appends it)
    "arena:figure": (
        "Five panels of held-out loss against optimizer step on a log scale, one per condition: "
        "reference, depth 48, learning rate 1.0, batch 1 and FP16, with one line per recipe. A "
        "cross at the top of a panel marks the step after which a run's weights became inf or "
        "NaN; each run's final loss is in the failure-mode table that follows."
    ),
}


def svg(fig, alt: str | None = None, caption: str | None = None) -> str:
    """Return `fig` as an inline, reproducible SVG figure with a text alternative, and close it.

    Args:
        fig: a matplotlib Figure.
        alt: what the figure shows (read by screen readers). Leave it out in chapters: the
            caption paragraph written after the block (`{: .gf-caption }`) names the figure
            (gradflow_site/inline.py).
        caption: optional visible caption under the figure (Markdown is not rendered).

    Raises:
        ValueError: `alt` is given but empty.
    """
    import matplotlib.pyplot as plt

    from gradflow_site.inline import ALT_PLACEHOLDER

    if alt is None:
        alt = ALT_PLACEHOLDER
    if not alt.strip():
        raise ValueError("svg: `alt` must describe what the figure shows, got an empty string.")
    buf = io.StringIO()
    # Date=None and the rc file's svg.hashsalt make two builds byte-identical.
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    label = html.escape(alt.strip(), quote=True)
    text = re.sub(r"<svg\b", f'<svg role="img" aria-label="{label}"', text, count=1)
    text = re.sub(r"(<svg[^>]*>)", rf"\1<title>{label}</title>", text, count=1)
    cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
    return f'<figure class="gf-figure">{text}{cap}</figure>'


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
