"""Browser helpers shared by the browser tests (tools.browser finds Chrome or Chromium, serves).

Without a browser the tests skip locally; under CI (CI=true) a missing browser is a failure
(.ci/run finds one or installs it).
"""

from __future__ import annotations

import os
from contextlib import contextmanager

import pytest

from tests._site import ROOT
from tools.browser import ARGS, CHROMIUM, mounted, page_paths, serve, widget_pages

__all__ = ["AXE", "require", "launch", "serve", "page_paths", "widget_pages", "mounted"]

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
    require(CHROMIUM is not None, "no Chrome or Chromium (set CHROME_PATH or install chromium)")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


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


@contextmanager
def open_page(
    browser,
    server: str,
    path: str,
    scheme: str = "default",
    width: int = 1280,
    js: bool = True,
    mount: bool = True,
):
    """Open `path` of the served site in a fresh context; yield (page, record).

    `record` collects console errors ("errors") and requests to other hosts ("foreign").
    With JavaScript on and `mount`, mounts every widget (they otherwise wait until scrolled
    near) and waits for them; `scheme` is Material's colour scheme ("default" or "slate").
    """
    context = browser.new_context(viewport={"width": width, "height": 900}, java_script_enabled=js)
    page = context.new_page()
    record = listen(page, server)
    try:
        page.goto(f"{server}/{path}", wait_until="load")
        if js:
            page.evaluate(f"document.body.setAttribute('data-md-color-scheme', '{scheme}')")
            if mount:
                page.wait_for_function(mounted)
        yield page, record
    finally:
        context.close()
