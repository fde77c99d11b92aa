"""A keyboard reader reaches every widget's controls by Tab alone, in page order.

Widgets mount when scrolled near; until then a focusable stand-in holds their place in the Tab
order (docs/assets/widgets/loader.js). These tests open each page without mounting anything and
press Tab from the top, on a desktop and a phone viewport.
"""

from __future__ import annotations

import pytest

from tests._browser import open_page, widget_pages

pytestmark = [pytest.mark.build, pytest.mark.browser]

# After a Tab: on a widget's stand-in, give the widget the moment it takes to mount (a person's
# next keypress is further away than that; focus then moves into it), at most 5 s; then say
# where focus is: "name:index" inside a mounted widget, "body", "" elsewhere, "stuck" when a
# stand-in kept focus. One round trip per key.
WHERE = """async () => {
  const start = performance.now();
  while (document.activeElement?.classList.contains('gf-widget__start')) {
    if (performance.now() - start > 5000) return 'stuck';
    await new Promise(r => requestAnimationFrame(r));
  }
  const a = document.activeElement;
  const w = a && a.closest('[data-gf-widget]');
  return w && w.dataset.gfState === 'ready' && w.querySelector('.gf-widget__live').contains(a)
    ? w.dataset.gfWidget + ':' + [...document.querySelectorAll('[data-gf-widget]')].indexOf(w)
    : (a && a.tagName === 'BODY' ? 'body' : '');
}"""


def tab_through(page, expected: list[str], limit: int = 900) -> list[str]:
    """Press Tab until focus wraps to the start, or has reached every widget in `expected`
    and left the last one (what follows holds no widget); return each widget reached, in
    order. A widget that keeps focus to itself runs into `limit` and fails."""
    reached: list[str] = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        where = page.evaluate(WHERE)
        assert where != "stuck", f"{page.url}: focus stayed on a widget's stand-in for 5 s"
        if where and where != "body" and where not in reached:
            reached.append(where)
        if reached and (where == "body" or (reached == expected and where == "")):
            return reached
    raise AssertionError(
        f"{page.url}: after {limit} Tabs focus has neither wrapped to the start nor left the "
        f"last widget (widgets reached: {reached})"
    )


@pytest.mark.long(seconds=10)
@pytest.mark.parametrize("width", [1280, 390])
def test_tab_reaches_every_widget_in_page_order(browser, server, site, width):
    missed = {}
    for path, names in widget_pages(site).items():
        with open_page(browser, server, path, width=width, mount=False) as (page, record):
            expected = [f"{name}:{i}" for i, name in enumerate(names)]
            reached = tab_through(page, expected)
            if reached != expected:
                missed[path] = {"expected": expected, "reached": reached}
            assert not record["errors"], record["errors"]
    assert not missed, f"widgets Tab does not reach in order at {width} px: {missed}"
