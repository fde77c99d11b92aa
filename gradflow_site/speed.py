"""Page speed: let the browser paint a page before it has run the page's scripts.

Material puts its bundle and `extra_javascript` at the end of `<body>` and the polyfills in
`<head>`, all as plain (parser-blocking) scripts; Lighthouse counts them as render-blocking.
`defer_scripts(html)` marks every external script `defer`: deferred scripts still run in
document order, before DOMContentLoaded, so the bundle still defines `document$` before
a11y.js and the widget loader subscribe to it. Inline scripts are left as they are. Called
from gradflow_site/hooks.py (on_post_page); measured with `make lighthouse`.
"""

from __future__ import annotations

import re

__all__ = ["defer_scripts"]

# an external classic script with no loading attribute yet: <script src="..."></script>
_SCRIPT = re.compile(r'<script src="([^"]+)"></script>')


def defer_scripts(html: str) -> str:
    """Return `html` with `defer` on every `<script src="...">` that has no other attribute."""
    return _SCRIPT.sub(r'<script src="\1" defer></script>', html)
