"""The diagnosis widget (docs/diagnosis.md) in chromium: the small functions it runs in the browser
(GF.logic.diagnosis) against torch on the page's own data, and its two selects.
"""

from __future__ import annotations

import pytest
import torch

from tests._browser import mounted, open_page

pytestmark = [pytest.mark.build, pytest.mark.browser]


@pytest.fixture(scope="module")
def page(browser, server):
    with open_page(browser, server, "diagnosis/") as (page, record):
        yield page
        assert not record["errors"]


@pytest.fixture(scope="module")
def data(page) -> dict:
    return page.evaluate(
        "JSON.parse(document.querySelector('[data-gf-widget=diagnosis]').dataset.gfData)"
    )


@pytest.fixture
def widget(page):
    """The widget, reset to its starting state by reloading the page."""
    page.reload()
    page.wait_for_function(mounted)
    return page.locator('[data-gf-widget="diagnosis"]')


def finite(row):
    return torch.tensor([v for v in row if v is not None], dtype=torch.float64)


@pytest.mark.parametrize(
    "values", [[3.0, 1.0, 2.0], [4.0, 1.0, 3.0, 2.0], [None, 2.0, 5.0], [None], [7.5]]
)
def test_diagnosis_median_matches_torch(page, values):
    ours = page.evaluate("(xs) => GF.logic.diagnosis.median(xs)", values)
    v = finite(values)
    if not len(v):
        assert ours is None
        return
    # torch.median takes the lower of the two middle values; the widget averages them
    expected = v.sort().values[(len(v) - 1) // 2 : len(v) // 2 + 1].mean().item()
    assert ours == pytest.approx(expected, rel=1e-12)


def test_diagnosis_peaks_and_gaps_match_the_data(page, data):
    for failure in data["failures"]:
        for series_by_key in (failure["fail"], failure["fix"], data["healthy"]):
            for key, series in series_by_key.items():
                peaks = page.evaluate("(s) => GF.logic.diagnosis.peaks(s)", series)
                gaps = page.evaluate("(s) => GF.logic.diagnosis.gaps(s)", series)
                for row, peak, gap in zip(series, peaks, gaps):
                    v = finite(row)
                    assert peak == (v.max().item() if len(v) else None), (failure["name"], key)
                    assert gap == len(row) - len(v)


def test_diagnosis_widget_opens_on_the_first_failure_and_its_signature(widget, data):
    first = data["failures"][0]
    assert widget.get_by_label("Failure", exact=True).input_value() == first["name"]
    assert widget.get_by_label("Signal", exact=True).input_value() == first["signature"]
    status = widget.locator(".gf-status")
    assert status.get_attribute("data-failure") == first["name"]


def test_diagnosis_widget_picking_a_failure_shows_its_signal_and_verdict(widget, data):
    growth = next(f for f in data["failures"] if f["name"] == "attention-logit growth")
    widget.get_by_label("Failure", exact=True).select_option(growth["name"])
    status = widget.locator(".gf-status")
    assert widget.get_by_label("Signal", exact=True).input_value() == growth["signature"]
    assert status.get_attribute("data-signal") == "logit"
    said = "made no difference" if growth["verdict"] == "no difference" else growth["verdict"]
    assert f"the remedy {said}." in status.text_content()


def test_diagnosis_widget_signal_select_redraws_the_chart(widget, data):
    widget.get_by_label("Failure", exact=True).select_option("missing divisor")
    widget.get_by_label("Signal", exact=True).select_option("loss")
    status = widget.locator(".gf-status")
    assert status.get_attribute("data-signal") == "loss"
    title = widget.locator("svg.gf-chart").get_attribute("aria-label")
    assert title.startswith("training loss (mean of 10 steps) against training step: missing")
    # one line per seed of the failing run, the remedy and the healthy run at least
    assert widget.locator("svg.gf-chart path").count() >= 3 * len(data["healthy"]["loss"])
