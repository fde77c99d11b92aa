"""A chapter through the build: its Markdown before markdown-exec runs it, its HTML after.

`prepare` takes the chapter's Markdown: it names broken snippet includes (errors.py), records
where every executed line comes from for error messages (errors.py), turns inline values into
hidden blocks (inline.py), expands the quizzes (quizzes.py) and puts a download button for the
chapter's lab under its title. `finish` takes the rendered HTML: it fills in the inline values
(inline.py) and moves each caption into its figure (captions.py). Both return the page and the
problems to report, each naming the file and line.
"""

from __future__ import annotations

import re
from pathlib import Path

from gradflow_site import captions, errors, inline, quizzes

__all__ = ["finish", "front_matter_lines", "prepare"]


def front_matter_lines(source: str | None, markdown: str) -> int:
    """Return how many lines of the file at `source` precede `markdown` (its front matter)."""
    try:
        text = Path(source).read_text(encoding="utf-8")
    except (OSError, TypeError):
        return 0
    return text[: len(text) - len(markdown)].count("\n") if text.endswith(markdown) else 0


def prepare(
    markdown: str, path: str, offset: int = 0, lab: str | None = None
) -> tuple[str, list[str]]:
    """Return the chapter's Markdown as markdown-exec should see it, and the problems found.

    Args:
        markdown: the chapter's Markdown body (front matter removed).
        path: the chapter as "docs/<file>.md", for messages.
        offset: lines of front matter above the body, so messages give the file's line.
        lab: the name of the chapter's lab (labs/<lab>.ipynb), or None when it has none.
    """
    markdown, problems = errors.check_includes(markdown, path, offset)
    errors.register_page(markdown, path, offset)
    markdown, more = inline.transform(markdown, path, offset)
    markdown, quiz_problems = quizzes.expand(markdown, path, offset)
    if lab is not None:
        button = (
            f"[:material-download: Download this chapter as a notebook](labs/{lab}.ipynb)"
            "{ .md-button download }\n"
        )
        markdown = re.sub(
            r"^(# .+\n)", lambda m: m.group(1) + "\n" + button, markdown, count=1, flags=re.M
        )
    return markdown, problems + more + quiz_problems


def finish(
    page_html: str, markdown: str, path: str, blocks_failed: bool = False
) -> tuple[str, list[str]]:
    """Return the chapter's rendered HTML with its inline values and captions in place.

    Args:
        page_html: the chapter as markdown-exec and MkDocs rendered it.
        markdown: the Markdown `prepare` returned (it names each inline expression).
        path: the chapter as "docs/<file>.md", for messages.
        blocks_failed: a block of the build raised; its own message is enough, not one per
            value it left unset.
    """
    page_html, problems = inline.substitute(page_html, markdown, path)
    if blocks_failed:
        problems = [p for p in problems if "was never evaluated" not in p]
    page_html, more = captions.attach(page_html, path)
    return page_html, problems + more
