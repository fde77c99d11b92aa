"""Browser helpers for the tests of the built site (conftest's `browser`: headless Chromium
driven by Playwright; `serve` from tools/browser.py): open a page with its widgets mounted, and
visit every page once for what every page must pass (console errors, foreign requests, math,
widgets, axe). Without a browser the tests skip locally; under CI (CI=true) they fail.
"""

import os
from contextlib import contextmanager
from urllib.parse import urlsplit

import pytest

from tests._site import ROOT
from tools.browser import ARGS, TEST_BROWSER, mounted, page_paths, serve  # noqa: F401
from tools.browser import widget_pages as widget_pages

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"


def require(condition, why: str) -> None:
    """Skip with `why` unless `condition`; under CI fail instead (the browser is required)."""
    if not condition:
        (pytest.fail if os.environ.get("CI") else pytest.skip)(f"{why} (required under CI)")


@contextmanager
def open_page(browser, server: str, path: str, scheme="default", width=1280, js=True, mount=True):
    """Open `path` of the served site in a browser context of its own; yield (page, record),
    `record` being the page's console errors ("errors") and requests to other hosts
    ("foreign"). With JavaScript, sets Material's colour `scheme` and, with `mount`, mounts
    every widget (they otherwise wait until scrolled near) and waits for them."""
    context = browser.new_context(viewport={"width": width, "height": 900}, java_script_enabled=js)
    page, record = context.new_page(), {"errors": [], "foreign": []}
    page.on("console", lambda m: m.type == "error" and record["errors"].append(m.text))
    page.on("pageerror", lambda e: record["errors"].append(str(e)))
    foreign = lambda url: urlsplit(url).netloc not in (urlsplit(server).netloc, "")  # noqa: E731
    page.on("request", lambda r: foreign(r.url) and record["foreign"].append(r.url))
    try:
        page.goto(f"{server}/{path}", wait_until="load")
        if js:
            page.evaluate(f"document.body.setAttribute('data-md-color-scheme', '{scheme}')")
            if mount:
                page.wait_for_function(mounted)
        yield page, record
    finally:
        context.close()


# axe's serious and critical violations in both colour schemes: all rules in the default one,
# the rules that read colours in the other (the schemes differ in colours only)
AXE_BOTH = """async () => {
  const out = {};
  for (const [scheme, only] of [['default'], ['slate', ['color-contrast', 'link-in-text-block']]]) {
    document.body.setAttribute('data-md-color-scheme', scheme);
    out[scheme] = (await axe.run(document, {resultTypes: ['violations'], runOnly: only}))
      .violations.filter(v => v.impact === 'serious' || v.impact === 'critical')
      .map(v => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map(n => n.target).join(' | ')}`);
  }
  document.body.setAttribute('data-md-color-scheme', 'default');
  return out;
}"""
# <math> elements; raw TeX (an arithmatex formula without <math>) or a math script; widgets'
# states, live parts left empty, controls, unnamed ones, the first one's outline when focused
FACTS = """() => {
  const all = (s, root = document) => [...root.querySelectorAll(s)];
  const live = all('.gf-widget__live');
  const controls = live.flatMap(l => all('input, select, button, [tabindex]', l));
  const name = c => c.labels?.[0]?.textContent || c.getAttribute('aria-label') || c.textContent;
  controls[0]?.focus();
  return {
    math: all('math').length,
    raw_math: all('.arithmatex').filter(e => !e.querySelector('math')).length
      + all('.katex, mjx-container, script[src*=katex], script[src*=mathjax]').length,
    states: all('[data-gf-widget]').map(e => e.dataset.gfWidget + ':' + e.dataset.gfState),
    empty: live.filter(e => !e.children.length).length,
    unnamed: controls.map((c, i) => name(c)?.trim() ? -1 : i).filter(i => i >= 0),
    controls: controls.length,
    outline: controls[0] && getComputedStyle(controls[0]).outlineStyle,
  };
}"""


def visit_every_page(site, server: str, browser) -> dict[str, dict]:
    """{path: what the page showed, widgets mounted, at 1280 px}: "errors" and "foreign" (see
    open_page), "axe" ({scheme: violations}; none without axe-core) and FACTS."""
    results = {}
    for path in page_paths(site):
        with open_page(browser, server, path) as (page, record):
            if AXE.exists():  # the final colours, not a transition between the schemes
                page.add_style_tag(content="* { transition: none !important; animation: none; }")
                page.add_script_tag(path=AXE)
            results[path] = {"axe": page.evaluate(AXE_BOTH) if AXE.exists() else {}, **record}
            results[path].update(page.evaluate(FACTS))
    return results
