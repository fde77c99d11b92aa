"""The arena widget tells its recipes apart and explains its marks, in both colour schemes."""

from __future__ import annotations

import pytest

from tests._browser import open_page

pytestmark = [pytest.mark.build, pytest.mark.browser]

RGB = """(names) => names.map(n => {
  const line = document.querySelector(`[data-gf-widget=arena] .gf-arena-run[data-recipe=${n}] path,
    [data-gf-widget=arena] .gf-arena-run[data-recipe=${n}] polyline`);
  return getComputedStyle(line).stroke.match(/\\d+/g).slice(0, 3).map(Number);
})"""


@pytest.mark.parametrize("scheme", ["default", "slate"])
def test_arena_recipes_differ_in_colour_and_marks_are_explained(browser, server, scheme):
    with open_page(browser, server, "arena/", scheme=scheme) as (page, record):
        widget = page.locator('[data-gf-widget="arena"]')
        baseline, full = page.evaluate(RGB, ["baseline", "full"])
        distance = sum((a - b) ** 2 for a, b in zip(baseline, full)) ** 0.5
        assert distance > 120, f"baseline {baseline} and full {full} are too alike"
        legend = widget.locator(".gf-arena-legend").text_content()
        assert "run stopped: a weight became inf or NaN" in legend
        assert "loss above the chart's top" in legend
        assert not record["errors"]
