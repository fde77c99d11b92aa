"""Captions written in Markdown: a `{: .gf-caption }` paragraph goes into the figure above it.

A paragraph marked `{: .gf-caption }` right after a figure or widget becomes its
`<figcaption>`; its text names the figure for screen readers (`ALT_PLACEHOLDER`, which
render.svg writes when a chapter gives no `alt`), and a widget takes its title from the
caption's leading bold text (`TITLE_PLACEHOLDER`, which widgets.widget writes when a chapter
gives no `title`).
"""

from __future__ import annotations

import html
import re

__all__ = ["ALT_PLACEHOLDER", "TITLE_PLACEHOLDER", "attach"]

ALT_PLACEHOLDER = "@@gf-alt@@"  # render.svg without `alt`: filled from the caption
TITLE_PLACEHOLDER = "@@gf-title@@"  # widgets.widget without `title`: filled from the caption

_CAPTION = re.compile(r'<p class="gf-caption">(?P<body>[\s\S]*?)</p>')
_FIGURE_TAG = re.compile(r"<figure\b[^>]*>|</figure>")
_STRONG_LEAD = re.compile(r"^\s*<strong>(?P<title>[\s\S]*?)</strong>\s*")
_TAGS = re.compile(r"<[^>]+>")


def _plain(fragment: str) -> str:
    """Return the text of an HTML fragment; inline TeX keeps its source without delimiters."""
    text = html.unescape(_TAGS.sub("", fragment))
    text = re.sub(r"\\[()\[\]]", "", text)  # \( \) \[ \] of arithmatex
    return " ".join(text.split())


def _figure_before(page_html: str, end: int) -> int | None:
    """Return where the outermost <figure> that closes right before `end` starts, or None."""
    head = page_html[:end].rstrip()
    if not head.endswith("</figure>"):
        return None
    depth = 0
    for m in reversed(list(_FIGURE_TAG.finditer(head))):
        depth += 1 if m.group(0) == "</figure>" else -1
        if depth == 0:
            return m.start()
    return None


def attach(page_html: str, path: str) -> tuple[str, list[str]]:
    """Move each `{: .gf-caption }` paragraph into the figure or widget just above it.

    The caption becomes the figure's `<figcaption>`; its plain text replaces an SVG's
    ALT_PLACEHOLDER; a widget takes the caption's leading bold text (or all of it) as its title.

    Returns:
        (HTML, problems): a caption with no figure above it, or a figure left without a
        caption, is a problem naming the page.
    """
    problems = []
    out, cursor = [], 0
    for m in _CAPTION.finditer(page_html):
        start = _figure_before(page_html, m.start())
        if start is None or start < cursor:
            problems.append(
                f"{path}: the caption {_plain(m.group('body'))[:60]!r}... has no figure or "
                "widget right above it; put it directly after the block that prints one."
            )
            continue
        figure = page_html[start : page_html.rindex("</figure>", 0, m.start())]
        out.append(page_html[cursor:start])
        out.append(_captioned(figure, m.group("body")))
        cursor = m.end()
    out.append(page_html[cursor:])
    page_html = "".join(out)
    for placeholder, what in ((ALT_PLACEHOLDER, "figure"), (TITLE_PLACEHOLDER, "widget")):
        if placeholder in page_html:
            problems.append(
                f"{path}: a {what} has no caption. Write its caption as a paragraph followed by "
                "`{: .gf-caption }` directly after the block that prints it."
            )
    return page_html, problems


def _captioned(figure: str, body: str) -> str:
    """Return `figure` (without its closing tag) closed with `body` as its caption."""
    text = html.escape(_plain(body), quote=True)
    if figure.startswith('<figure class="gf-widget"'):
        lead = _STRONG_LEAD.match(body)
        title = html.escape(_plain(lead.group("title")).rstrip(".:"), quote=True) if lead else text
        figure = figure.replace(TITLE_PLACEHOLDER, title)
        rest = body[lead.end() :] if lead else ""
        figure = figure.replace(ALT_PLACEHOLDER, text)
        cap = f"<figcaption>{rest.strip()}</figcaption>" if rest.strip() else ""
        return f"{figure}{cap}</figure>"
    figure = figure.replace(ALT_PLACEHOLDER, text)
    return f"{figure}<figcaption>{body.strip()}</figcaption></figure>"
