"""A click on a table-of-contents entry leaves its heading at the top, under the header."""

from __future__ import annotations

import pytest

from tests._browser import open_page, page_paths

pytestmark = [pytest.mark.build, pytest.mark.browser]

SETTLE = "() => new Promise(r => setTimeout(() => requestAnimationFrame(() => r()), 600))"
# where the heading is, then where the browser puts it when asked directly (its scroll margin
# under the sticky header), then whether the page is scrolled as far as it goes
OFFSET = """(id) => {
  const h = document.getElementById(id);
  const header = document.querySelector('.md-header').getBoundingClientRect().bottom;
  const now = h.getBoundingClientRect().top - header;
  const bottom = scrollY >= document.documentElement.scrollHeight - innerHeight - 1;
  const y = scrollY;
  h.scrollIntoView({block: 'start', behavior: 'instant'});
  const intended = h.getBoundingClientRect().top - header;
  scrollTo({top: y, behavior: 'instant'});
  return [now, intended, bottom];
}"""


def toc_offsets(page) -> dict[str, tuple[float, float, bool]]:
    """Click every entry of the page's table of contents.

    Returns {#anchor: (px from the header's bottom to the heading, the same for the browser's
    own landing, page scrolled to its end)}.
    """
    out = {}
    # Material writes the entries as absolute URLs ending in #anchor
    links = page.locator(".md-sidebar--secondary .md-nav--secondary a[href*='#']")
    for i in range(links.count()):
        anchor = links.nth(i).get_attribute("href").split("#", 1)[1]
        links.nth(i).click()
        page.evaluate(SETTLE)
        out[f"#{anchor}"] = page.evaluate(OFFSET, anchor)
    return out


def test_toc_click_lands_on_the_heading(browser, server, site):
    worst = {}
    for path in page_paths(site):
        if path.startswith(("labs/", "404")) or path == "":
            continue
        with open_page(browser, server, path, width=1280, mount=False) as (page, _):
            for href, (offset, intended, at_end) in toc_offsets(page).items():
                # the browser's own landing (about 20 px below the header) within 2 px, and
                # that landing near the header; a last heading may stay lower only when the
                # page cannot scroll any further
                if abs(offset - intended) > 2 or not (0 <= intended <= 24 or at_end):
                    worst[f"{path}{href}"] = (round(offset), round(intended))
    assert not worst, f"headings off their place after a TOC click (px, intended): {worst}"
