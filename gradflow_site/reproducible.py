"""MkDocs hook, listed first in mkdocs.yml: the build runs this checkout's code, whatever is
installed.

The wheel ships gradflow_ref only; gradflow_site, the build, is imported from the checkout.
`mkdocs build` (a console script) does not put the checkout on sys.path, and MkDocs restores
sys.path after loading each hook file, so hooks.py's imports and the chapters'
`from gradflow_site...` blocks need it put there: `on_config`, which runs before every other
plugin's (priority 1000), puts the repository root first on sys.path (so gradflow_ref, too, is
this checkout's, even beside another installed copy). It also puts snippets/ last on sys.path:
a reader saves train.py (Chapter 7c's script) beside the arena's code and imports it, and the
arena's blocks do the same here.
"""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.plugins import event_priority

ROOT = str(Path(__file__).resolve().parents[1])
SNIPPETS = str(Path(ROOT) / "snippets")


def _checkout_first() -> None:
    if sys.path[:1] != [ROOT]:
        if ROOT in sys.path:
            sys.path.remove(ROOT)
        sys.path.insert(0, ROOT)
    if SNIPPETS not in sys.path:
        sys.path.append(SNIPPETS)


def on_startup(command, dirty, **kwargs):
    _checkout_first()


@event_priority(1000)
def on_config(config, **kwargs):
    _checkout_first()
    return config
