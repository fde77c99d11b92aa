"""Browser helpers shared by the browser tests (tools.browser finds Chrome or Chromium, or
Chromium's headless shell first, and serves).

Without a browser the tests skip locally; under CI (CI=true) a missing browser is a failure
(.ci/run finds one or installs it).
"""

from __future__ import annotations

import functools
import http.server
import json
import os
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests._site import ROOT
from tools.browser import ARGS, TEST_BROWSER, mounted, page_paths, serve, widget_pages

__all__ = [
    "AXE",
    "COLOUR_RULES",
    "require",
    "launch",
    "serve_site",
    "page_paths",
    "widget_pages",
    "mounted",
    "open_page",
    "visit_every_page",
]

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"


def require(condition: bool, why: str) -> None:
    """Skip with `why` unless `condition`; under CI fail instead (the browser is required)."""
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{why} (required under CI; .ci/run installs it)")
    pytest.skip(why)


@contextmanager
def launch():
    """Launch headless chromium through Playwright; yield the Browser."""
    require(
        TEST_BROWSER is not None,
        "no Chrome or Chromium (set CHROME_PATH, or install chromium-headless-shell or chromium)",
    )
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=TEST_BROWSER, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


SEARCH_INDEX = "search/search_index.json"
# where the test servers serve axe-core beside the site: a script loaded from a URL is compiled
# once and then taken from Chromium's code cache on every page (inline, 0.1 CPU-s a page)
AXE_URL = "/__tests__/axe.min.js"


@contextmanager
def serve_site(site: Path, search_index: bool = True):
    """Serve `site` over http on a free local port, and axe-core at AXE_URL; yield the base URL.

    With `search_index` False, SEARCH_INDEX is answered with an index that has the site's
    configuration and no documents. Material's search worker fetches the index and builds its
    lunr index on every page load, in a thread of its own, whether or not anyone searches:
    about 0.15 CPU-s a load on the 2-core reference machine, and the browser tests load about
    a hundred pages. The tests of layout, keyboard and widgets neither search nor read the
    worker, so they are served without it; the one visit of every page (console errors,
    third-party requests, axe) and the search test in the browser get the real index.
    """
    empty = None
    if not search_index:
        real = json.loads((site / SEARCH_INDEX).read_text(encoding="utf-8"))
        empty = json.dumps({"config": real["config"], "docs": []}).encode()

    class Handler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            path = self.path.split("?")[0]
            if path == AXE_URL and AXE.exists():
                self._send(AXE.read_bytes(), "text/javascript")
            elif path == "/" + SEARCH_INDEX and empty is not None:
                self._send(empty, "application/json")
            else:
                super().do_GET()

        def _send(self, body: bytes, kind: str):
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "max-age=3600")
            self.end_headers()
            self.wfile.write(body)

    with serve(handler=functools.partial(Handler, directory=str(site))) as url:
        yield url


def listen(page, server: str) -> dict[str, list[str]]:
    """Record `page`'s console errors ("errors") and requests to other hosts ("foreign")."""
    from urllib.parse import urlsplit

    host = urlsplit(server).netloc
    record: dict[str, list[str]] = {"errors": [], "foreign": []}
    page.on("console", lambda m: record["errors"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: record["errors"].append(str(e)))
    page.on(
        "request",
        lambda r: (
            record["foreign"].append(r.url)
            if urlsplit(r.url).netloc not in (host, "") and not r.url.startswith("data:")
            else None
        ),
    )
    return record


class _Tab:
    """One page (tab) a worker navigates from test to test, in a context of its own."""

    def __init__(self, browser, server: str, js: bool):
        self.context = browser.new_context(
            viewport={"width": 1280, "height": 900}, java_script_enabled=js
        )
        self.page = self.context.new_page()
        self.record = listen(self.page, server)
        self.busy = False

    def release(self) -> bool:
        """Leave no state for the next test: storage cleared, pointer parked, a blank page.

        Returns False (and closes the tab's context) when the tab cannot be reset.
        """
        page = self.page
        self.busy = False
        try:
            if page.url.startswith("http"):
                page.evaluate("() => { localStorage.clear(); sessionStorage.clear(); }")
            page.mouse.move(0, 0)
            page.goto("about:blank")
            return True
        except Exception:  # a crashed or closed page: the next test gets a new tab
            self.context.close()
            return False


# (browser, server, js) -> the worker's tab for them
_TABS: dict[tuple[int, str, bool], _Tab] = {}


@contextmanager
def _fresh(browser, server: str, width: int, js: bool):
    context = browser.new_context(viewport={"width": width, "height": 900}, java_script_enabled=js)
    page = context.new_page()
    try:
        yield page, listen(page, server)
    finally:
        context.close()


@contextmanager
def _reused(browser, server: str, width: int, js: bool):
    key = (id(browser), server, js)
    tab = _TABS.get(key)
    if tab is not None and tab.busy and not js:  # no script to open a popup with
        with _fresh(browser, server, width, js) as opened:
            yield opened
        return
    if tab is not None and tab.busy:
        # a second page while the tab is open (a module's page, then a test's; pages side by
        # side): a popup window the tab opens, which shares its renderer process and, being a
        # window of its own rather than a background tab, renders while it is not in front
        with tab.context.expect_page() as opened:
            tab.page.evaluate("() => { window.open('about:blank', '_blank', 'popup'); }")
        page = opened.value
        try:
            page.set_viewport_size({"width": width, "height": 900})
            yield page, listen(page, server)
        finally:
            page.close()
        return
    if tab is None or tab.page.is_closed():
        tab = _TABS[key] = _Tab(browser, server, js)
    tab.busy = True
    try:
        tab.page.set_viewport_size({"width": width, "height": 900})
        for seen in tab.record.values():
            seen.clear()
        yield tab.page, tab.record
    finally:
        if not tab.release():
            del _TABS[key]


@contextmanager
def open_page(
    browser,
    server: str,
    path: str,
    scheme: str = "default",
    width: int = 1280,
    js: bool = True,
    mount: bool = True,
    fresh: bool = False,
):
    """Open `path` of the served site; yield (page, record).

    `record` collects console errors ("errors") and requests to other hosts ("foreign").
    With JavaScript on and `mount`, mounts every widget (they otherwise wait until scrolled
    near) and waits for them; `scheme` is Material's colour scheme ("default" or "slate").

    The page is a new document in the worker's one tab, which every test navigates in turn:
    a tab that opens a page of the site again costs a third of a new one in a new context (its
    renderer process and compiled scripts stay). Between tests the tab's storage is cleared,
    the pointer parked and the tab left on about:blank, so no state crosses from one test to
    the next. A second page while the tab is in use opens as a popup window of the tab (it
    shares the tab's renderer and its storage); `fresh` opens a context of its own instead.
    """
    opener = _fresh if fresh else _reused
    with opener(browser, server, width, js) as (page, record):
        page.goto(f"{server}/{path}", wait_until="load")
        if js:
            page.evaluate(f"document.body.setAttribute('data-md-color-scheme', '{scheme}')")
            if mount:
                page.wait_for_function(mounted)
        yield page, record


# the axe rules that read colours: the only ones a colour scheme can change
COLOUR_RULES = ["color-contrast", "link-in-text-block"]
# serious and critical violations, with the first elements of each when `selectors`
AXE_RUN = """async ([rules, selectors]) => {
  const options = {resultTypes: ['violations'], selectors};
  if (rules) options.runOnly = rules;
  return (await axe.run(document, options)).violations
    .filter(v => v.impact === 'serious' || v.impact === 'critical')
    .map(v => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map(n => n.target).join(' | ')}`);
}"""
# math: <math> elements, and arithmatex's raw TeX (\( or \[ as a formula's text) or a math
# script's output; widgets: their states, live parts left empty, controls and the unnamed ones
FACTS = """() => {
  const live = [...document.querySelectorAll('.gf-widget__live')];
  const controls = live.flatMap(l => [...l.querySelectorAll('input, select, button, [tabindex]')]);
  return {
    math: document.querySelectorAll('math').length,
    raw_math: [...document.querySelectorAll('.arithmatex')]
      .filter(el => !el.querySelector('math')).length
      + document.querySelectorAll('.katex, mjx-container, script[src*=katex],'
        + ' script[src*=mathjax]').length,
    states: [...document.querySelectorAll('[data-gf-widget]')]
      .map(e => e.dataset.gfWidget + ':' + e.dataset.gfState),
    empty: live.filter(e => !e.children.length).length,
    unnamed: controls.map((c, i) => [i, c.labels?.[0]?.textContent
      || c.getAttribute('aria-label') || c.textContent])
      .filter(([, n]) => !n || !n.trim()).map(([i]) => i),
    controls: controls.length,
  };
}"""


# axe in both colour schemes (see visit_every_page), started and left running in the page:
# window.__gfAxe is the promise of {scheme: violations}
AXE_BOTH = (
    """(colourRules) => { window.__gfAxe = (async () => {
  const run = """
    + AXE_RUN
    + """;
  const out = {};
  for (const [scheme, rules] of [['default', null], ['slate', colourRules]]) {
    document.body.setAttribute('data-md-color-scheme', scheme);
    out[scheme] = await run([rules, false]);
    if (out[scheme].length) out[scheme] = await run([rules, true]);  // naming the elements
  }
  document.body.setAttribute('data-md-color-scheme', 'default');
  return out;
})(); }"""
)


def visit_every_page(site, server: str, request) -> dict[str, dict]:
    """Visit every page once, widgets mounted, at 1280 px; return {path: what it showed}.

    Per page: console errors and third-party requests while it loaded and mounted ("errors",
    "foreign"), math ("math", "raw_math"), widgets ("states", "empty", "controls", "unnamed",
    and "outline": the outline style of the first widget control once focused), and axe's
    serious and critical violations per colour scheme ("axe"). axe runs every rule in the
    default scheme, and the rules whose outcome colours decide (COLOUR_RULES) in the second:
    the schemes differ in colours only (gradflow.css and Material set custom properties and
    colours under `data-md-color-scheme`), on the same DOM, so every other rule finds the same
    in both. The browser fixture is taken here, so a worker that only reads the result
    starts none.

    Two tabs, each in a context (and a renderer process) of its own, take the pages in turn:
    while axe checks a page in one, the next page loads in the other.
    """
    axe = AXE.exists()
    browser = request.getfixturevalue("browser")
    results, started = {}, {}
    tabs = [_Tab(browser, server, js=True) for _ in range(2)]

    def start(tab, path):
        for seen in tab.record.values():
            seen.clear()
        page = tab.page
        page.goto(f"{server}/{path}", wait_until="load")
        page.evaluate("document.body.setAttribute('data-md-color-scheme', 'default')")
        page.wait_for_function(mounted)
        # axe checks the live widgets, not their fallbacks (they are mounted now)
        started[id(tab)] = path, page.evaluate(FACTS)
        if axe:
            # measure the final colours, not a transition between the two schemes
            page.add_style_tag(
                content="*, *::before, *::after { transition: none !important;"
                " animation: none !important; }"
            )
            page.add_script_tag(url=AXE_URL)
            page.evaluate(AXE_BOTH, COLOUR_RULES)

    def finish(tab):
        path, current = started.pop(id(tab))
        page = tab.page
        current["axe"] = page.evaluate("() => window.__gfAxe") if axe else {}
        control = page.locator(".gf-widget__live :is(input, select, button, [tabindex])")
        if control.count():
            control.first.focus()
            current["outline"] = control.first.evaluate("e => getComputedStyle(e).outlineStyle")
        results[path] = {**current, "errors": list(tab.record["errors"]),
                         "foreign": list(tab.record["foreign"])}  # fmt: skip

    try:
        for n, path in enumerate(page_paths(site)):
            tab = tabs[n % 2]
            if id(tab) in started:
                finish(tab)
            start(tab, path)
        for tab in tabs:
            if id(tab) in started:
                finish(tab)
    finally:
        for tab in tabs:
            tab.context.close()
    return dict(sorted(results.items()))
