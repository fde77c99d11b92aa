"""What a build says about itself: where its time went, and what every shown block printed.

The build log ends with how many blocks ran and where (here, in the parallel fork, from the
cache), the time spent on widget data, each page's render time and the slowest blocks
(`summary`). With GRADFLOW_SHOWN_BLOCKS set, the build also writes what every block shown with
its source printed, page by page (`write_shown`), for tests/test_copy_run.py.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from gradflow_site import exec_cache

__all__ = ["page_forked", "page_rendered", "page_started", "start", "summary", "write_shown"]

_state: dict = {
    "started": {},  # page -> when its rendering began
    "shown_from": {},  # page -> index of its first shown block in exec_cache.shown_blocks()
    "forked": {},  # page -> seconds, for pages the parallel fork rendered
    "seconds": {},  # page -> render seconds
    "shown": {},  # chapter -> [(session, code, output)] of its shown blocks
}


def start() -> None:
    """Forget the pages of an earlier build (`mkdocs serve` builds again in one process)."""
    for pages in _state.values():
        pages.clear()


def page_started(uri: str) -> None:
    """Note that the page docs/`uri` starts rendering: its blocks run from now on."""
    exec_cache.set_page(uri)
    _state["started"][uri] = time.perf_counter()
    _state["shown_from"][uri] = len(exec_cache.shown_blocks())


def page_forked(uri: str, seconds: float) -> None:
    """Note that the parallel fork rendered the page docs/`uri` in `seconds`."""
    _state["forked"][uri] = seconds


def page_rendered(uri: str) -> float | None:
    """Note that the page docs/`uri` is rendered; return its render seconds (None if unknown)."""
    started = _state["started"].pop(uri, None)
    if uri.endswith(".md"):
        first = _state["shown_from"].pop(uri, None)
        if first is not None:
            _state["shown"][uri] = exec_cache.shown_blocks()[first:]
    if started is None:
        return None
    seconds = _state["forked"].pop(uri, time.perf_counter() - started)
    _state["seconds"][uri] = seconds
    return seconds


def write_shown(path: Path) -> None:
    """Write {page: [{"session", "code", "output"}, ...]} of every shown block to `path`."""
    path.write_text(
        json.dumps(
            {
                page: [{"session": s, "code": c, "output": o} for s, c, o in blocks]
                for page, blocks in sorted(_state["shown"].items())
            },
            indent=1,
        ),
        encoding="utf-8",
    )


def summary() -> list[str]:
    """Return the build's closing log lines: blocks run, widget data, pages and blocks by time.

    GRADFLOW_SLOWEST_BLOCKS sets how many of the slowest blocks are named (8 by default).
    """
    hits, misses = exec_cache.stats()
    blocks, seconds = exec_cache.widget_stats()
    slowest = sorted(_state["seconds"].items(), key=lambda kv: -kv[1])
    top = exec_cache.slowest_blocks(int(os.environ.get("GRADFLOW_SLOWEST_BLOCKS", "8")))
    return [
        f"executed blocks: {misses} run here, {exec_cache.forked()} in a parallel fork, "
        f"{hits} from the cache (.cache/exec)",
        f"widget data: {seconds:.1f} s in {blocks} blocks run",
        "page render seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in slowest),
        "slowest blocks: " + "; ".join(f"{p} {s:.1f} s `{line}`" for s, p, line in top),
    ]
