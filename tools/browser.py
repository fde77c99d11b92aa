"""Headless Chrome or Chromium for the browser tests, the screenshot command and Lighthouse: find
it, serve a site.

`find_chrome()` takes CHROME_PATH (or CHROME_BIN, which GitHub's runner images set) when it names
a browser, else the first of google-chrome, chromium and chromium-browser on PATH, skipping the
snap wrappers (Ubuntu's apt `chromium-browser` only starts the snap, which headless CI cannot
use). `find_chrome(shell=True)`, what the browser tests take (TEST_BROWSER), looks for
Chromium's headless shell on PATH before those: the same Blink and V8 without the browser's
own layers, which Playwright itself runs for headless tests by default, and which runs this
project's browser tests in less CPU time (Debian: `apt-get install
chromium-headless-shell`). Lighthouse and the screenshots take a full browser, as readers have.
Playwright drives whichever is found (its own browser download does not work on the build
machines). `python3 -m tools.browser [--shell]` prints the path, or exits 1 when there is none:
.ci/chrome uses it before anything is installed (standard library only).
"""

from __future__ import annotations

import functools
import http.server
import os
import re
import shutil
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

__all__ = [
    "CHROMIUM",
    "TEST_BROWSER",
    "ARGS",
    "find_chrome",
    "serve",
    "page_paths",
    "widget_pages",
    "mounted",
]

NAMES = ("google-chrome", "google-chrome-stable", "chromium", "chromium-browser")
SHELLS = ("chromium-headless-shell", "chrome-headless-shell")


def _usable(path: str) -> bool:
    """True when `path` is an executable browser, not a wrapper that starts a snap."""
    file = Path(path)
    if not (file.is_file() and os.access(file, os.X_OK)):
        return False
    real = file.resolve()
    if real.parts[:2] == ("/", "snap"):
        return False
    with open(real, "rb") as f:
        head = f.read(65536)
    # a launcher script (Debian's chromium is one) is fine unless it hands over to a snap
    return not (head.startswith(b"#!") and b"/snap/" in head)


def find_chrome(environ=None, which=shutil.which, shell: bool = False) -> str | None:
    """Return the path of a usable Chrome or Chromium, or None.

    CHROME_PATH or CHROME_BIN comes first; then, with `shell`, a headless shell on PATH; then a
    full browser on PATH.
    """
    environ = os.environ if environ is None else environ
    for var in ("CHROME_PATH", "CHROME_BIN"):
        path = environ.get(var)
        if path and _usable(path):
            return path
    for name in (SHELLS if shell else ()) + NAMES:
        path = which(name)
        if path and _usable(path):
            return path
    return None


CHROMIUM = find_chrome()
TEST_BROWSER = find_chrome(shell=True)
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
    e.g. tools.lighthouse's compressing one) when given.
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


if __name__ == "__main__":
    shell = sys.argv[1:] == ["--shell"]
    found = TEST_BROWSER if shell else CHROMIUM
    if found is None:
        names = (SHELLS if shell else ()) + NAMES
        sys.exit(
            f"no Chrome or Chromium found (checked CHROME_PATH, CHROME_BIN, {', '.join(names)})"
        )
    print(found)
