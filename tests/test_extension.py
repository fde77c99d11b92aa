"""gradflow_site.extension: inline values, captioned figures and widgets, MathML, in Markdown."""

from __future__ import annotations

import logging

import markdown
import pytest

from gradflow_site.render import ALT
from gradflow_site.widgets import TITLE
from tests._site import tiny_build


def convert(text: str) -> str:
    md = markdown.Markdown(
        extensions=["pymdownx.blocks.caption", "pymdownx.arithmatex", "gradflow_site.extension"],
        extension_configs={"pymdownx.arithmatex": {"generic": True}},
    )
    return md.convert(text)


FIGURE = f'<figure class="gf-figure"><svg role="img" aria-label="{ALT}"></svg></figure>'
WIDGET = (
    f'<figure class="gf-widget" data-gf-widget="w" aria-label="{TITLE}">'
    f'<p class="gf-widget__title">{TITLE}</p><div class="gf-widget__static">{FIGURE}</div></figure>'
)


def test_a_caption_goes_into_its_figure_and_names_it():
    html = convert(f"{FIGURE}\n\n/// caption\n**Loss.** It falls, by $x^2$.\n///\n")
    assert html.count("<figure") == 1
    assert 'aria-label="Loss. It falls, by x^2."' in html
    assert '<figcaption><strong>Loss.</strong> It falls, by <span class="arithmatex"><math' in html


def test_a_captions_formula_names_its_figure_in_words_a_screen_reader_reads():
    caption = "**Norm.** It grows as $\\sqrt{k}$, to $2^{-24}$."
    html = convert(f"{FIGURE}\n\n/// caption\n{caption}\n///\n")
    assert 'aria-label="Norm. It grows as sqrt k, to 2^-24."' in html


def test_a_widget_takes_its_title_from_the_captions_bold_lead():
    html = convert(f"{WIDGET}\n\n/// caption\n**Clip a gradient.** Drag the slider.\n///\n")
    assert html.count("<figure") == 2  # the widget and its static figure, nothing around them
    assert html.startswith('<figure class="gf-widget"')
    assert '<p class="gf-widget__title">Clip a gradient</p>' in html
    assert 'aria-label="Clip a gradient. Drag the slider."' in html  # the static figure
    assert "<figcaption>Drag the slider.</figcaption>" in html


def test_a_figure_without_a_caption_is_reported(caplog):
    with caplog.at_level(logging.WARNING):
        convert(f"{FIGURE}\n\nNo caption here.\n")
    assert "a figure has no caption: write a `/// caption` block" in caplog.text


def test_inline_values_are_written_into_the_sentence_escaped():
    html = convert("One `{python} 1 + 1`, a tag `{python} '<b>'`, code `` `{python} x` ``.\n")
    assert "<p>One 2, a tag &lt;b&gt;, code <code>`{python} x`</code>.</p>" in html


def test_an_inline_value_inside_math_is_tex():
    html = convert("So $a = `{python} 2 ** 10`$ here.\n")
    assert "<mn>1024</mn>" in html


def test_a_block_that_prints_nothing_leaves_no_empty_paragraph():
    html = convert("A.\n\n<p></p>\n\nB.\n")
    assert "<p></p>" not in html


@pytest.mark.build
def test_strict_build_names_the_line_of_a_value_that_raises(tmp_path):
    result = tiny_build(tmp_path, "# T\n\nFine `{python} 1`.\n\nBroken `{python} 1 / 0`.\n")
    log = result.stdout + result.stderr
    assert result.returncode != 0
    assert (
        "docs/index.md:5: inline value `{python} 1 / 0` raised ZeroDivisionError: "
        "division by zero" in log
    )
