"""Step-through players: Play at the last step starts the run over (it used to do nothing)."""

from __future__ import annotations

import pytest

from tests._browser import open_page

pytestmark = [pytest.mark.build, pytest.mark.browser]


@pytest.mark.parametrize(
    ("path", "name"),
    [("loss_scaling/", "dynamic_scaling"), ("checkpointing/", "checkpointing")],
)
def test_play_at_the_last_step_starts_over(browser, server, path, name):
    with open_page(browser, server, path) as (page, record):
        widget = page.locator(f'[data-gf-widget="{name}"]')
        status = f"document.querySelector('[data-gf-widget={name}] .gf-status').dataset.step"
        slider = widget.get_by_role("slider", name="Step")
        slider.focus()
        slider.press("End")
        last = int(page.evaluate(status))
        assert last > 2
        widget.get_by_role("button", name="Play").click()
        # it starts over from step 0 and plays on; it does not sit at the last step
        page.wait_for_function(f"+{status} >= 1 && +{status} < {last}")
        widget.get_by_role("button", name="Pause").click()
        assert not record["errors"]


def test_checkpointing_cells_keep_their_size_with_few_layers(browser, server):
    with open_page(browser, server, "checkpointing/") as (page, record):
        widget = page.locator('[data-gf-widget="checkpointing"]')
        layers = widget.get_by_role("slider", name="Layers N")
        layers.focus()
        layers.press("Home")
        widths = [
            box["width"]
            for box in (r.bounding_box() for r in widget.locator("svg.gf-ckpt__cells rect").all())
            if box
        ]
        assert len(widths) >= 2
        assert max(widths) <= 60, f"cells drawn {max(widths):.0f} px wide at the fewest layers"
        assert not record["errors"]
