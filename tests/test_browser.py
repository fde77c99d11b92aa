"""The built site in a real browser (Chromium driven by Playwright): accessibility, no
third-party request, no console error, math as MathML, both colour schemes. Every page is
visited once for the whole run (the `visits` fixture, tests/_browser.py's visit_every_page).

Without chromium these tests skip locally; under CI (CI=true) a missing browser is a failure,
and .ci/run installs it first.
"""

from __future__ import annotations

import json
from contextlib import contextmanager

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


@pytest.fixture()
def clipping_with_clipboard(browser, server):
    """The clipping chapter in a context of its own that may read and write the clipboard."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
    page = context.new_page()
    page.goto(f"{server}/clipping/", wait_until="load")
    page.wait_for_function(mounted)
    yield page
    context.close()


def _last_block(page):
    block = page.locator(".md-typeset .highlight").last
    # Material mounts a block (and gives its pre an id) only once it has scrolled into view
    assert block.locator("pre").get_attribute("id") is None, "the last block mounted at load"
    return block


def test_code_block_copy_button_copies_before_the_block_mounts(clipping_with_clipboard):
    clipping = clipping_with_clipboard
    block = _last_block(clipping)
    button = block.locator('button[data-md-type="copy"]')
    assert button.count() == 1
    button.click()  # scrolls it into view first, as a reader would
    copied = clipping.evaluate("navigator.clipboard.readText()")
    assert copied == block.locator("code").inner_text().rstrip()
    assert block.locator('button[data-md-type="copy"]').count() == 1, "Material added a second"


def test_code_block_below_the_fold_is_reached_by_keyboard(clipping):
    block = _last_block(clipping)
    block_id = block.get_attribute("id")
    # from the last heading link before the block, Tab until focus reaches the block or passes
    # it: the first stop there must be the block's copy button, though it never scrolled in
    clipping.evaluate(
        """id => {
            const block = document.getElementById(id);
            [...document.querySelectorAll('.md-content a.headerlink')]
                .filter(a => a.compareDocumentPosition(block) & Node.DOCUMENT_POSITION_FOLLOWING)
                .at(-1).focus();
        }""",
        block_id,
    )
    where = """id => {
        const block = document.getElementById(id), el = document.activeElement;
        const reached = block.contains(el)
            || (block.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING);
        return reached ? [el.dataset.mdType ?? el.tagName, el.closest('.highlight')?.id] : null;
    }"""
    for _ in range(12):
        clipping.keyboard.press("Tab")
        if (focused := clipping.evaluate(where, block_id)) is not None:
            break
    assert focused == ["copy", block_id]


def test_code_blocks_that_scroll_sideways_are_focusable_before_they_mount(clipping):
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


def test_code_blocks_keep_their_height_when_they_scroll_into_view(clipping):
    # off screen, content-visibility skips a block and the page uses its stated height; a wrong
    # one would move the page under the reader when the block comes into view
    heights = clipping.evaluate(
        """async () => {
            const blocks = [...document.querySelectorAll('.md-typeset .highlight')];
            const before = blocks.map(d => d.getBoundingClientRect().height);
            const after = [];
            for (const d of blocks) {
                d.scrollIntoView();
                await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
                after.push(d.getBoundingClientRect().height);
            }
            return [before, after];
        }"""
    )
    before, after = heights
    assert len(before) > 5
    assert before == pytest.approx(after, abs=2)


@contextmanager
def _reader(browser, prefers: str, stored: str | None, index: int):
    """A new browser context preferring the colour scheme `prefers`; with `stored`, holding
    the palette a reader picked (scheme `stored`, toggle `index`) as Material stores it,
    under the site's root."""
    context = browser.new_context(color_scheme=prefers)
    try:
        if stored:
            palette = json.dumps({"index": index, "color": {"media": "", "scheme": stored}})
            context.add_init_script(f"localStorage.setItem('/.__palette', {palette!r})")
        yield context
    finally:
        context.close()


@pytest.mark.parametrize(
    "prefers, stored, expected",
    [("dark", None, "slate"), ("light", None, "default"), ("dark", "default", "default")],
)
def test_preferred_colour_scheme_is_set_before_materials_bundle_runs(
    browser, server, prefers, stored, expected
):
    # the bundle never runs here: what <body> shows is what the page's own inline scripts set
    # (gradflow_site/speed.early_palette), so a dark-preferring first visit does not paint
    # light and then restyle; a palette the reader chose (stored by Material) still wins
    with _reader(browser, prefers, stored, index=0) as context:
        context.route("**/assets/javascripts/bundle.*.min.js", lambda route: route.abort())
        page = context.new_page()
        page.goto(f"{server}/arena/", wait_until="load")
        assert page.evaluate("document.body.dataset.mdColorScheme") == expected
        # transitions stay off until the bundle has set the palette (it then turns them on)
        assert page.evaluate("document.body.hasAttribute('data-md-color-switching')")


# the page's colour scheme (what its color-scheme metas decide): the system colour CanvasText
# of an element outside <body>, which Material's stylesheet gives a scheme of its own
PAGE_SCHEME = """() => {
  const probe = document.createElement('div');
  probe.style.color = 'CanvasText';
  document.documentElement.append(probe);
  const colour = getComputedStyle(probe).color;
  probe.remove();
  return colour === 'rgb(255, 255, 255)' ? 'dark' : colour === 'rgb(0, 0, 0)' ? 'light' : colour;
}"""


@pytest.mark.parametrize(
    "prefers, stored, expected",
    [("light", None, "light"), ("dark", None, "dark"), ("light", "slate", "dark")],
)
def test_page_colour_scheme_follows_the_palette_and_a_switch(
    browser, server, prefers, stored, expected
):
    # gradflow_site/speed.early_palette writes the page's color-scheme meta before Material's
    # bundle appends its own; it must say what Material's says, and give way on a switch
    with _reader(browser, prefers, stored, index=1) as context:
        page = context.new_page()
        page.goto(f"{server}/arena/", wait_until="load")
        page.wait_for_function("() => !document.body.hasAttribute('data-md-color-switching')")
        material = "() => [...document.querySelectorAll('meta[name=color-scheme]')].at(-1).content"
        assert page.evaluate(PAGE_SCHEME) == page.evaluate(material) == expected
        page.locator("label[for^=__palette_]:not([hidden])").click()
        other = {"light": "dark", "dark": "light"}[expected]
        page.wait_for_function(f"() => ({material})() === '{other}'")
        assert page.evaluate(PAGE_SCHEME) == other
        assert page.locator("meta[name=color-scheme]").count() == 1  # ours gave way


def test_bundle_turns_transitions_back_on_after_setting_the_palette(browser, server):
    # the page's inline script sets data-md-color-switching (Material's stylesheet: no
    # transitions under it) before the bundle runs; Material removes it once it has set the
    # palette, so a reader's later palette switch or hover animates as Material intends
    with open_page(browser, server, "arena/") as (page, record):
        page.wait_for_function("() => !document.body.hasAttribute('data-md-color-switching')")
        link = page.locator(".md-header__button.md-logo")
        assert link.evaluate("e => getComputedStyle(e).transitionDuration") != "0s"
        assert not record["errors"], record["errors"]
