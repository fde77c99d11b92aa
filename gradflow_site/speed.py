"""Page speed: paint before the scripts run; no per-code-block work when a page loads.

Material puts its bundle and `extra_javascript` at the end of `<body>` and the polyfills in
`<head>`, all as plain (parser-blocking) scripts; Lighthouse counts them as render-blocking.
`defer_scripts(html)` marks every external script `defer`: deferred scripts still run in
document order, before DOMContentLoaded, so the bundle still defines `document$` before
a11y.js and the widget loader subscribe to it. Inline scripts are left as they are.

Material mounts every code block when a page loads: it inserts the copy button, then reads the
block's size, so each block costs a forced style and layout pass and undoes the
`content-visibility` that lets the browser skip blocks off screen, which Lighthouse counts
as blocking time on a slow phone. mkdocs.yml therefore turns on Material's `content.lazy` (a
block mounts when it scrolls into view) and turns off `content.code.copy`; `code_blocks(html)`
writes each block's copy button into the HTML instead, with Material's markup, so every button
is there from the start (keyboard users reach it without scrolling first) and Material's own
clipboard integration copies the code; it also states each block's height, which the browser
assumes while it skips the block.
docs/assets/a11y.js makes blocks that scroll sideways focusable before they mount. `faster`
applies these and `early_palette` to every built page (hooks.py, on_post_page); `make
lighthouse` measures what they change.
"""

from __future__ import annotations

import itertools
import json
import re

__all__ = ["code_blocks", "defer_scripts", "early_palette", "faster"]

# an external classic script with no loading attribute yet: <script src="..."></script>
_SCRIPT = re.compile(r'<script src="([^"]+)"></script>')


def defer_scripts(html: str) -> str:
    """Return `html` with `defer` on every `<script src="...">` that has no other attribute."""
    return _SCRIPT.sub(r'<script src="\1" defer></script>', html)


# a fenced code block as pymdownx.highlight writes it (executed blocks' source and output too)
_CODE = re.compile(
    r'<div class="(language-[\w-]+ highlight)"><pre><span></span><code>(.*?)</code></pre></div>',
    re.S,
)
# a code block's rendered height in the em of its div (Material: code at 0.85em with line-height
# 1.4, padding 0.77em top and bottom; the pre's 1em margins stay inside, as content-visibility
# contains layout), as chromium lays it out
_LINE_EM, _FRAME_EM = 1.19, 3.31


def code_blocks(html: str) -> str:
    """Return `html` with a copy button and a stated height on every code block.

    The button is the one Material would mount, in Material's markup.

    Each block's `div` gets an id (`gf-code-N`) that its button's `data-clipboard-target`
    names; Material's clipboard integration handles every `[data-clipboard-target]` button,
    mounted or not. Each block also gets its height from its line count as the size the browser
    assumes while `content-visibility` skips the block off screen, so blocks that come into view
    do not move the page (the stylesheet's 300 px is for figures, widgets and tables).
    """
    n = itertools.count()

    def add(m: re.Match) -> str:
        i, code = next(n), m[2]
        lines = code.count("\n") + (not code.endswith("\n"))
        height = f"calc({lines} * {_LINE_EM}em + {_FRAME_EM}em)"
        return (
            f'<div class="{m[1]}" id="gf-code-{i}" style="contain-intrinsic-block-size: auto '
            f'{height}"><pre><span></span><nav class="md-code__nav">'
            f'<button class="md-code__button" title="Copy to clipboard" '
            f'data-clipboard-target="#gf-code-{i} code" data-md-type="copy"></button></nav>'
            f"<code>{code}</code></pre></div>"
        )

    return _CODE.sub(add, html)


# Material's schemes whose stylesheet sets `color-scheme: dark` (the others: light)
_DARK_SCHEMES = ["slate"]
# Material's inline script at the top of <body>: a palette the reader chose, from localStorage
_PALETTE_SCRIPT = re.compile(r'<script>var palette=__md_get\("__palette"\);.*?</script>', re.S)


def early_palette(html: str, palettes: list[dict]) -> str:
    """Return `html` with the colour scheme the browser prefers applied as <body> is parsed.

    A first visit with no palette stored has Material's bundle pick the palette whose `media`
    matches, after the page has loaded, and set it on <body>: a dark-preferring reader saw the
    page light, then restyled dark, in a long first task after load. This script, after
    Material's own, sets the same attributes first, so the page is dark from its first paint. A
    palette the reader chose (stored) is Material's to apply, as before.

    The script also saves the bundle two restyles of the whole page, each of which it forced
    inside its first task (Material's palette component sets the palette, then reads the
    header's computed style):
    - it puts `data-md-color-switching` on <body> while <body> holds a handful of elements.
      Material's stylesheet matches `[data-md-color-switching] *` (transitions off), so
      Material adding the attribute restyled every element. Set early, Material's own set
      changes nothing; it removes the attribute once the palette is set, as before.
    - it adds `<meta name="color-scheme">` with the scheme Material's stylesheet gives the page
      (`dark` for slate, `light` otherwise). Material appends a meta of its own and writes the
      header's `color-scheme` into it; the page's colour scheme changing from `normal` then
      restyled every element. The first such meta in the document decides, so ours does, with
      the same value. When the reader switches palettes, ours is removed and Material's, which
      follows the switch, decides from then on.

    Args:
        html: a built page.
        palettes: mkdocs.yml's `theme.palette` entries (media, scheme, primary, accent).
    """
    choices = [
        {
            "media": p["media"],
            "scheme": p.get("scheme", "default"),
            "primary": p.get("primary", "indigo").replace(" ", "-").lower(),
            "accent": p.get("accent", "indigo").replace(" ", "-").lower(),
        }
        for p in palettes
        if p.get("media")
    ]
    if not choices:
        return html
    dark = json.dumps(_DARK_SCHEMES, separators=(",", ":"))
    script = (
        '<script>document.body.setAttribute("data-md-color-switching","");'
        '__md_get("__palette")||' + json.dumps(choices, separators=(",", ":")) + ""
        ".some(function(p){if(!matchMedia(p.media).matches)return!1;for(var k in p)"
        'document.body.setAttribute("data-md-color-"+k,p[k]);return!0});'
        '(function(m){m.name="color-scheme";m.content=' + dark + ".indexOf("
        'document.body.getAttribute("data-md-color-scheme"))<0?"light":"dark";'
        "document.head.appendChild(m);"
        'document.addEventListener("change",function(e){if(e.target.name==="__palette")'
        'm.remove()})})(document.createElement("meta"))</script>'
    )
    return _PALETTE_SCRIPT.sub(lambda m: m[0] + script, html, count=1)


def faster(html: str, palettes: list[dict] | dict | None) -> str:
    """Return a built page that paints before its scripts run, with every change above.

    Args:
        html: a built page.
        palettes: mkdocs.yml's `theme.palette`: one entry, a list of them, or None.
    """
    palettes = [palettes] if isinstance(palettes, dict) else palettes or []
    return early_palette(code_blocks(defer_scripts(html)), palettes)
