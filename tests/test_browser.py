"""The built site in a real browser (Debian's chromium driven by Playwright): accessibility,
no third-party request, no console error, math typeset, both colour schemes.

Without chromium these tests skip locally; under CI (CI=true) a missing browser is a failure,
and .ci/run installs it first.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests._site import ROOT

pytestmark = [pytest.mark.build, pytest.mark.browser]

# Debian's chromium here; GitHub's Ubuntu runners ship Google Chrome instead
CHROMIUM = next(
    (
        path
        for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
        if (path := shutil.which(name))
    ),
    None,
)
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
]


def _require(condition: bool, why: str) -> None:
    if condition:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{why} (required under CI; .ci/run installs it)")
    pytest.skip(why)


@pytest.fixture(scope="module")
def server(site):
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(site))
    )
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def browser():
    _require(CHROMIUM is not None, "chromium is not installed (apt-get install chromium)")
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _page_paths(site: Path) -> list[str]:
    return sorted(
        str(p.parent.relative_to(site)) + "/" if p.parent != site else ""
        for p in site.rglob("index.html")
        if "assets" not in p.parts
    )


@pytest.fixture(scope="module")
def visits(site, server, browser) -> dict[str, dict]:
    """Visit every page once; record console errors, third-party requests and axe results.

    axe runs twice per page, once per colour scheme (Material's `data-md-color-scheme`).
    """
    axe = AXE.read_text(encoding="utf-8") if AXE.exists() else None
    context = browser.new_context()
    page = context.new_page()
    host = urlsplit(server).netloc
    current: dict = {}
    page.on("console", lambda m: current["errors"].append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: current["errors"].append(str(e)))
    page.on(
        "request",
        lambda r: (
            current["foreign"].append(r.url)
            if urlsplit(r.url).netloc not in (host, "") and not r.url.startswith("data:")
            else None
        ),
    )
    results = {}
    for path in _page_paths(site):
        current = {"errors": [], "foreign": [], "axe": {}}
        page.goto(f"{server}/{path}", wait_until="load")
        page.wait_for_function("() => typeof renderMathInElement === 'function'")
        current["katex"] = page.locator(".katex").count()
        current["katex_errors"] = page.locator(".katex-error").count()
        if axe is not None:
            # measure the final colours, not a transition between the two schemes
            page.add_style_tag(
                content="*, *::before, *::after { transition: none !important;"
                " animation: none !important; }"
            )
            page.add_script_tag(content=axe)
            for scheme in ("default", "slate"):
                page.evaluate(f"document.body.setAttribute('data-md-color-scheme', '{scheme}')")
                current["axe"][scheme] = page.evaluate(
                    "async () => (await axe.run(document, {resultTypes: ['violations']}))"
                    ".violations.filter(v => v.impact === 'serious' || v.impact === 'critical')"
                    ".map(v => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3)"
                    ".map(n => n.target).join(' | ')}`)"
                )
        results[path] = current
    context.close()
    return results


def test_pages_load_without_console_errors(visits):
    errors = {path: v["errors"] for path, v in visits.items() if v["errors"]}
    assert not errors


def test_pages_make_no_third_party_request_in_the_browser(visits):
    foreign = {path: v["foreign"] for path, v in visits.items() if v["foreign"]}
    assert not foreign


def test_math_is_typeset_by_self_hosted_katex(visits):
    assert visits["telephone/"]["katex"] > 0, "no KaTeX output on the telephone page"
    assert all(v["katex_errors"] == 0 for v in visits.values())


@pytest.mark.parametrize("scheme", ["default", "slate"])
def test_pages_have_no_serious_accessibility_violations(visits, scheme):
    _require(AXE.exists(), "axe-core is not installed (npm ci)")
    problems = [
        f"/{path} [{scheme}] {problem}"
        for path, v in visits.items()
        for problem in v["axe"][scheme]
    ]
    assert not problems, "\n".join(problems)
