"""At a phone's 390 px: no page scrolls sideways, figure text stays readable, wide tables say so."""

from __future__ import annotations

import pytest

from tests._browser import open_page, page_paths

pytestmark = [pytest.mark.build, pytest.mark.browser]

MIN_TEXT_PX = 11
MEASURE = """() => {
  const out = {width: document.documentElement.scrollWidth, figures: [], tables: []};
  for (const svg of document.querySelectorAll('.md-content svg[role="img"]')) {
    const box = svg.getBoundingClientRect();
    if (!box.width || !svg.closest('.gf-figure') || svg.closest('.gf-widget__live')) continue;
    const scale = box.width / svg.viewBox.baseVal.width;
    const sizes = [...svg.querySelectorAll('text')]
      .map(t => parseFloat(getComputedStyle(t).fontSize) * scale).filter(Number.isFinite);
    if (sizes.length) out.figures.push(Math.min(...sizes));
  }
  for (const wrap of document.querySelectorAll('.md-typeset__scrollwrap')) {
    if (wrap.scrollWidth > wrap.clientWidth + 1)
      out.tables.push(getComputedStyle(wrap).backgroundImage.includes('gradient'));
  }
  return out;
}"""


@pytest.mark.long(seconds=7)
def test_phone_width_pages_fit_and_figures_read(browser, server, site):
    problems = {}
    for path in page_paths(site):
        if path.startswith("404"):
            continue
        with open_page(browser, server, path, width=390) as (page, _):
            # every section laid out, as a reader scrolling through sees it
            page.evaluate(
                "() => document.querySelectorAll('.md-content *')"
                ".forEach(e => e.style.contentVisibility = 'visible')"
            )
            got = page.evaluate(MEASURE)
        bad = []
        if got["width"] > 390:
            bad.append(f"page is {got['width']} px wide")
        small = [round(px, 1) for px in got["figures"] if px < MIN_TEXT_PX]
        if small:
            bad.append(f"figure text down to {min(small)} px")
        if not all(got["tables"]):
            bad.append(f"{got['tables'].count(False)} scrolling table(s) without a hint")
        if bad:
            problems[path or "/"] = bad
    assert not problems, problems
