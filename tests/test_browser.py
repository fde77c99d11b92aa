"""The built site in a real browser (Chromium driven by Playwright): accessibility, no
third-party request, no console error, math as MathML, both colour schemes, code that
scrolls sideways reachable by keyboard. Every page is
visited once for the whole run (the `visits` fixture, tests/_browser.py's visit_every_page).

Without chromium these tests skip locally; under CI (CI=true) a missing browser is a failure,
and .ci/run installs it first.
"""

from __future__ import annotations

import pytest

from tests._browser import AXE, mounted, open_page, require

pytestmark = [pytest.mark.build, pytest.mark.browser]


@pytest.mark.long(seconds=30)  # the first to ask for `visits`: it visits every page
def test_pages_load_without_console_errors(visits):
    errors = {path: v["errors"] for path, v in visits.items() if v["errors"]}
    assert not errors


def test_pages_make_no_third_party_request_in_the_browser(visits):
    foreign = {path: v["foreign"] for path, v in visits.items() if v["foreign"]}
    assert not foreign


def test_math_is_mathml_typeset_at_build_time(visits):
    assert visits["telephone/"]["math"] > 0, "no <math> element on the telephone page"
    raw = {path: v["raw_math"] for path, v in visits.items() if v["raw_math"]}
    assert not raw, f"raw TeX or a math script on: {raw}"


@pytest.mark.parametrize("scheme", ["default", "slate"])
def test_pages_have_no_serious_accessibility_violations(visits, scheme):
    require(AXE.exists(), "axe-core is not installed (npm ci)")
    problems = [
        f"/{path} [{scheme}] {problem}"
        for path, v in visits.items()
        for problem in v["axe"][scheme]
    ]
    assert not problems, "\n".join(problems)


@pytest.fixture()
def clipping(browser, server):
    """The clipping chapter at a desktop size, scrolled to the top, code blocks checked."""
    with open_page(browser, server, "clipping/") as (page, _):
        yield page


def test_code_blocks_that_scroll_sideways_are_focusable(clipping):
    clipping.set_viewport_size({"width": 360, "height": 900})  # narrow: code overflows
    clipping.reload(wait_until="load")
    clipping.wait_for_function(mounted)
    unfocusable = clipping.evaluate(
        """() => [...document.querySelectorAll('.md-typeset .highlight > pre > code')]
            .filter(el => el.scrollWidth > el.clientWidth && el.getAttribute('tabindex') !== '0')
            .map(el => el.closest('.highlight').id)"""
    )
    scrolling = clipping.evaluate(
        """() => [...document.querySelectorAll('.md-typeset .highlight > pre > code')]
            .filter(el => el.scrollWidth > el.clientWidth).length"""
    )
    assert scrolling > 3, "no code block scrolls sideways at 360 px: the test checks nothing"
    assert not unfocusable
