"""A click on a table-of-contents entry leaves its heading at the top, under the header."""

from __future__ import annotations

import pytest

from tests._browser import open_page, page_paths

pytestmark = [pytest.mark.build, pytest.mark.browser]

SETTLE = "() => new Promise(r => setTimeout(() => requestAnimationFrame(() => r()), 600))"
# where the heading is under the sticky header, and whether the page is scrolled as far as it
# goes (a last heading may then stay lower)
OFFSET = """(id) => {
  const h = document.getElementById(id);
  const header = document.querySelector('.md-header').getBoundingClientRect().bottom;
  const bottom = scrollY >= document.documentElement.scrollHeight - innerHeight - 1;
  return [h.getBoundingClientRect().top - header, bottom];
}"""
# gradflow.css lands a heading 16 px below the header (its scroll margin); the issue allows 20
MOST = 20


def toc_offsets(page) -> dict[str, tuple[float, bool]]:
    """Click every entry of the page's table of contents.

    Returns {#anchor: (px from the header's bottom to the heading, page scrolled to its end)}.
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
            for href, (offset, at_end) in toc_offsets(page).items():
                if not (0 <= offset <= MOST or (at_end and offset > 0)):
                    worst[f"{path}{href}"] = round(offset, 1)
    assert not worst, f"headings off their place after a TOC click (px below the header): {worst}"
