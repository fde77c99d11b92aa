"""Every interactive widget on the built site, in chromium: it mounts, logs no error, makes no
third-party request, works without JavaScript (static figure), fits a phone and stays inside
its payload budgets. Per-widget behaviour is tested in tests/test_widgets_<chapter>.py; what a
mounted page shows comes from the run's one visit of every page (the `visits` fixture).
"""

from __future__ import annotations

import contextlib
import gzip
import html
import re

import pytest

from gradflow_site.widgets import DATA_BUDGET, WIDGET_DIR
from tests._browser import mounted, open_page, widget_pages
from tests._site import ROOT

pytestmark = [pytest.mark.build, pytest.mark.browser]

JS_BUDGET = 400 * 1024  # gzipped bytes of all widget scripts together (issue 7)


@pytest.fixture(scope="module")
def pages(site) -> dict[str, list[str]]:
    found = widget_pages(site)
    assert found, "the built site has no widget"
    return found


def test_widgets_mount_without_console_error_or_foreign_request(visits, pages):
    problems = []
    for path, names in pages.items():
        v = visits[path]
        bad = [s for s in v["states"] if not s.endswith(":ready")]
        if bad or v["empty"] or v["errors"] or v["foreign"] or len(v["states"]) != len(names):
            problems.append(f"/{path}: {v}")
    assert not problems, "\n".join(problems)


def test_widget_scripts_load_only_on_pages_with_widgets(browser, server, site, pages):
    plain = next(p for p in ["", "cheatsheet/"] if p not in pages)
    with open_page(browser, server, plain) as (page, _):
        loaded = page.evaluate(
            "() => performance.getEntriesByType('resource').map(e => e.name)"
            ".filter(n => n.includes('/assets/widgets/') && !n.endsWith('loader.js'))"
        )
    assert loaded == []


def test_widgets_mount_when_scrolled_near_and_not_before(browser, server, pages):
    path = max(pages, key=lambda p: len(pages[p]))
    with open_page(browser, server, path, width=1280, mount=False) as (page, record):
        page.wait_for_function(
            "() => [...document.querySelectorAll('[data-gf-widget]')].every(e => e.dataset.gfState)"
        )
        last = page.locator("[data-gf-widget]").last
        assert last.get_attribute("data-gf-state") == "waiting", "mounted while far below"
        last.scroll_into_view_if_needed()
        page.wait_for_function(
            "() => [...document.querySelectorAll('[data-gf-widget]')].pop()"
            ".dataset.gfState === 'ready'"
        )
        assert not record["errors"]


def test_widgets_mount_when_materials_document_observable_stays_silent(browser, server, pages):
    # the offline copy (file://) never emits Material's document$: the loader must not wait
    path = next(iter(pages))
    context = browser.new_context()
    # stand-in for Material's bundle: a document$ that never emits
    context.add_init_script("window.document$ = { subscribe() {} };")
    page = context.new_page()
    page.route("**/assets/javascripts/bundle.*.js", lambda route: route.abort())
    page.goto(f"{server}/{path}", wait_until="load")
    page.wait_for_function(mounted, timeout=10_000)
    states = page.eval_on_selector_all("[data-gf-widget]", "els => els.map(e => e.dataset.gfState)")
    context.close()
    assert states == ["ready"] * len(pages[path])


WIDGET_NAMES_ARE = (
    "names => [...document.querySelectorAll('[data-gf-widget]')]"
    ".map(el => el.dataset.gfWidget).join() === names.join()"
)


def test_widgets_mount_after_instant_navigation(browser, site, pages):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    # Material matches links against the sitemap by protocol and host, not port, so instant
    # navigation engages only at the site's own address: serve the build there, in the browser
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    base = re.search(r"^site_url:\s*(\S+)", config, re.M).group(1).rstrip("/") + "/"

    def fulfil(route):
        rel = route.request.url[len(base) :].split("#")[0].split("?")[0]
        target = site / rel
        if target.is_dir():
            target = target / "index.html"
        if target.is_file():
            route.fulfill(path=str(target))
        else:
            route.fulfill(status=404, body="not found")

    start, target = list(pages)[:2]
    context = browser.new_context()
    context.route(f"{base}**", fulfil)
    page = context.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"{base}{start}", wait_until="load")
    page.wait_for_function(mounted)
    page.wait_for_timeout(500)  # Material reads the sitemap before it takes over links
    page.evaluate("window.__sameDocument = true")  # gone if the browser loads a new document
    page.locator(f'.md-sidebar--primary a.md-nav__link[href$="{target}"]').first.click()
    page.wait_for_url(f"**/{target}")
    # Material may change the address before it swaps the content, and until then the start
    # page's widgets are there, mounted: wait for the target's widgets (the assert below says
    # what was there instead if they never come)
    with contextlib.suppress(PlaywrightTimeout):
        page.wait_for_function(WIDGET_NAMES_ARE, arg=pages[target], timeout=15_000)
    page.wait_for_function(mounted)
    same = page.evaluate("window.__sameDocument === true")
    names = page.eval_on_selector_all("[data-gf-widget]", "els => els.map(e => e.dataset.gfWidget)")
    context.close()
    assert same, "the click loaded a new document: instant navigation did not engage"
    assert names == pages[target]
    assert not errors


def test_widgets_show_their_static_figure_without_javascript(browser, server, pages):
    for path, names in pages.items():
        with open_page(browser, server, path, js=False) as (page, _):
            shown = page.eval_on_selector_all(
                ".gf-widget__static",
                "els => els.filter(e => e.offsetHeight > 40 && e.querySelector('svg, table, img'))"
                ".length",
            )
            assert shown == len(names), f"/{path}: {shown} of {len(names)} static figures shown"


@pytest.mark.long(seconds=5)
def test_widgets_fit_a_phone_width_screen(browser, server, pages):
    for path in pages:
        with open_page(browser, server, path, width=360) as (page, _):
            wide = page.eval_on_selector_all(
                "[data-gf-widget]",
                "els => els.filter(e => e.scrollWidth > e.clientWidth + 1)"
                ".map(e => e.dataset.gfWidget)",
            )
            assert not wide, f"/{path}: widgets wider than a 360 px screen: {wide}"


def test_widget_controls_are_labelled_and_show_focus(visits, pages):
    for path, v in ((p, visits[p]) for p in pages):
        assert v["controls"] > 0, f"/{path}: widgets without any control"
        assert not v["unnamed"], f"/{path}: controls {v['unnamed']} have no accessible name"
        assert v["outline"] != "none", f"/{path}: focused control shows no outline"


def test_widget_scripts_stay_within_the_payload_budget():
    scripts = sorted(WIDGET_DIR.glob("*.js"))
    total = sum(len(gzip.compress(p.read_bytes(), 9)) for p in scripts)
    assert total <= JS_BUDGET, f"widget JS {total / 1024:.0f} KiB gzipped > {JS_BUDGET // 1024}"


def test_widget_data_stay_within_the_page_budget(site, pages):
    for path in pages:
        text = (site / path / "index.html").read_text(encoding="utf-8")
        data = sum(len(html.unescape(m)) for m in re.findall(r'data-gf-data="([^"]*)"', text))
        assert data <= DATA_BUDGET, f"/{path}: {data / 1024:.0f} KiB of widget data"
