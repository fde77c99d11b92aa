"""The number line (docs/precision.md) says what was typed, what each format stores, and how."""

from __future__ import annotations

import pytest

from tests._browser import open_page

pytestmark = [pytest.mark.build, pytest.mark.browser]


@pytest.mark.parametrize("scheme", ["default", "slate"])
def test_numberline_reports_typed_and_stored_values(browser, server, scheme):
    with open_page(browser, server, "precision/", scheme=scheme) as (page, record):
        widget = page.locator('[data-gf-widget="numberline"]')
        widget.get_by_label("or type one").fill("65519")
        status = widget.locator(".gf-status").text_content()
        assert status.startswith("x = 65519:"), status
        assert "FP16 stores 65504 rounded down by 15" in status
        assert "BF16 stores 65536 rounded up by 17" in status
        assert "FP32 stores 65519 exactly" in status
        assert "65520" not in status  # the typed value is never shown rounded
        # up and down are on the number line: below zero, a smaller magnitude is up
        widget.get_by_label("or type one").fill("-65519")
        status = widget.locator(".gf-status").text_content()
        assert "FP16 stores -65504 rounded up by 15" in status, status
        assert "BF16 stores -65536 rounded down by 17" in status, status
        # the subnormal band is drawn fainter in both schemes: lighter on white, darker on slate
        assert "faint band: subnormal" in widget.locator("svg").first.text_content()
        assert not record["errors"]
