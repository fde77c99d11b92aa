"""Page speed: paint before the scripts run; no per-code-block work when a page loads.

Material puts its bundle and `extra_javascript` at the end of `<body>` and the polyfills in
`<head>`, all as plain (parser-blocking) scripts; Lighthouse counts them as render-blocking.
`defer_scripts(html)` marks every external script `defer`: deferred scripts still run in
document order, before DOMContentLoaded, so the bundle still defines `document$` before
a11y.js and the widget loader subscribe to it. Inline scripts are left as they are.

Material mounts every code block when a page loads: it inserts the copy button, then reads the
block's size, so each block costs a forced style and layout pass and undoes the
`content-visibility` that lets the browser skip blocks off screen (on a long chapter, 60% of
the main-thread time Lighthouse counts as blocking). mkdocs.yml therefore turns on Material's
`content.lazy` (a block mounts when it scrolls into view) and turns off `content.code.copy`;
`copy_buttons(html)` writes each block's copy button into the HTML instead, with Material's
markup, so every button is there from the start (keyboard users reach it without scrolling
first) and Material's own clipboard integration copies the code. Both are called from
gradflow_site/hooks.py (on_post_page); measured with `make lighthouse`.
"""

from __future__ import annotations

import itertools
import re

__all__ = ["defer_scripts", "copy_buttons"]

# an external classic script with no loading attribute yet: <script src="..."></script>
_SCRIPT = re.compile(r'<script src="([^"]+)"></script>')


def defer_scripts(html: str) -> str:
    """Return `html` with `defer` on every `<script src="...">` that has no other attribute."""
    return _SCRIPT.sub(r'<script src="\1" defer></script>', html)


# a fenced code block as pymdownx.highlight writes it (executed blocks' source and output too)
_CODE = re.compile(r'<div class="(language-[\w-]+ highlight)"><pre><span></span><code>')


def copy_buttons(html: str) -> str:
    """Return `html` with a copy button on every code block, as Material would mount it.

    Each block's `div` gets an id (`gf-code-N`) that its button's `data-clipboard-target`
    names; Material's clipboard integration handles every `[data-clipboard-target]` button,
    mounted or not.
    """
    n = itertools.count()

    def add(m: re.Match) -> str:
        i = next(n)
        return (
            f'<div class="{m[1]}" id="gf-code-{i}"><pre><span></span><nav class="md-code__nav">'
            f'<button class="md-code__button" title="Copy to clipboard" '
            f'data-clipboard-target="#gf-code-{i} code" data-md-type="copy"></button></nav><code>'
        )

    return _CODE.sub(add, html)
