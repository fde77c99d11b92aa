"""Headless chromium for the browser tests and the screenshot command: find it, serve a site.

Debian's chromium here; GitHub's Ubuntu runners ship Google Chrome instead. Playwright drives
whichever is found (its own browser download does not work on the build machines).
"""

from __future__ import annotations

import functools
import http.server
import re
import shutil
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

__all__ = ["CHROMIUM", "ARGS", "serve", "page_paths", "widget_pages", "mounted"]

CHROMIUM = next(
    (
        path
        for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
        if (path := shutil.which(name))
    ),
    None,
)
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]


class _Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # a browser that drops a connection it no longer needs is not an error worth a traceback
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextmanager
def serve(directory: Path | None = None, handler=None):
    """Serve over http on a free local port in a thread; yield the base URL.

    Serves the files of `directory` quietly, or answers with `handler` (a request handler class,
    e.g. gradflow_site.lighthouse's compressing one) when given.
    """

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    if handler is None:
        handler = functools.partial(Quiet, directory=str(directory))
    httpd = _Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def page_paths(site: Path) -> list[str]:
    """Return the URL path of every page of the built site ("" for the home page)."""
    return sorted(
        str(p.parent.relative_to(site)) + "/" if p.parent != site else ""
        for p in site.rglob("index.html")
        if "assets" not in p.parts
    )


_WIDGET = re.compile(r'data-gf-widget="([a-z0-9_]+)"')


def widget_pages(site: Path) -> dict[str, list[str]]:
    """Return {page path: [widget names in page order]} for every page with a widget."""
    out = {}
    for path in page_paths(site):
        names = _WIDGET.findall((site / path / "index.html").read_text(encoding="utf-8"))
        if names:
            out[path] = names
    return out


# JavaScript: true once every widget on the page has mounted (or failed, which logs an error)
# and a11y.js has made every code block that scrolls sideways focusable. Widgets mount when
# scrolled near (loader.js); GFMountAll() mounts the rest at once. Code blocks are checked in
# idle moments after load (GFCodeChecked).
mounted = (
    "() => { if (window.GFMountAll) GFMountAll();"
    " return window.GFCodeChecked !== false"
    " && [...document.querySelectorAll('[data-gf-widget]')]"
    ".every(el => ['ready', 'error'].includes(el.dataset.gfState)); }"
)
