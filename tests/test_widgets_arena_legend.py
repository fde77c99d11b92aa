"""The arena widget tells its recipes apart and explains its marks, in both colour schemes."""

from __future__ import annotations

import pytest

from tests._browser import open_page

pytestmark = [pytest.mark.build, pytest.mark.browser]

LOOK = """(names) => names.map(n => {
  const line = document.querySelector(`[data-gf-widget=arena] .gf-arena-run[data-recipe=${n}] path,
    [data-gf-widget=arena] .gf-arena-run[data-recipe=${n}] polyline`);
  const style = getComputedStyle(line);
  return [style.stroke.match(/\\d+/g).slice(0, 3).map(Number), style.strokeDasharray];
})"""


@pytest.mark.parametrize("scheme", ["default", "slate"])
def test_arena_recipes_differ_in_look_and_marks_are_explained(browser, server, scheme):
    with open_page(browser, server, "arena/", scheme=scheme) as (page, record):
        widget = page.locator('[data-gf-widget="arena"]')
        names = widget.evaluate("w => JSON.parse(w.dataset.gfData).recipes")
        looks = page.evaluate(LOOK, names)
        # nine recipes, six colours: colour and dash pattern together tell every pair apart
        assert len({(tuple(rgb), dash) for rgb, dash in looks}) == len(names), looks
        legend = widget.locator(".gf-arena-legend").text_content()
        assert "loss became inf or NaN" in legend
        assert "loss above the chart's top" in legend
        assert not record["errors"]
