"""Captions written in Markdown, moved into their figures (gradflow_site/captions.py)."""

from __future__ import annotations

from gradflow_site import captions

PAGE = "docs/x.md"


def test_attach_moves_the_caption_into_the_figure_and_names_it():
    page = (
        f'<figure class="gf-figure"><svg aria-label="{captions.ALT_PLACEHOLDER}"></svg></figure>'
        '\n<p class="gf-caption"><strong>Norms.</strong> Fall &amp; rise.</p>'
    )
    out, problems = captions.attach(page, PAGE)
    assert problems == []
    assert out == (
        '<figure class="gf-figure"><svg aria-label="Norms. Fall &amp; rise."></svg>'
        "<figcaption><strong>Norms.</strong> Fall &amp; rise.</figcaption></figure>"
    )


def test_attach_titles_a_widget_from_its_bold_lead():
    t = captions.TITLE_PLACEHOLDER
    page = (
        f'<figure class="gf-widget" aria-label="{t}"><p class="gf-widget__title">{t}</p>'
        f'<div><figure class="gf-figure"><svg aria-label="{captions.ALT_PLACEHOLDER}"></svg>'
        '</figure></div></figure><p class="gf-caption"><strong>Clip it.</strong> Drag.</p>'
    )
    out, problems = captions.attach(page, PAGE)
    assert problems == []
    assert 'aria-label="Clip it"' in out and '<p class="gf-widget__title">Clip it</p>' in out
    assert out.endswith("</figure></div><figcaption>Drag.</figcaption></figure>")


def test_attach_reports_a_figure_without_caption():
    page = f'<figure class="gf-figure"><svg aria-label="{captions.ALT_PLACEHOLDER}"></svg></figure>'
    _, problems = captions.attach(page, PAGE)
    assert problems == [
        "docs/x.md: a figure has no caption. Write its caption as a paragraph followed by "
        "`{: .gf-caption }` directly after the block that prints it."
    ]


def test_attach_reports_a_caption_without_figure():
    _, problems = captions.attach('<p>x</p><p class="gf-caption">Lost.</p>', PAGE)
    assert problems and "has no figure or widget right above it" in problems[0]


def test_attach_drops_tex_delimiters_from_the_accessible_name():
    page = (
        f'<figure class="gf-figure"><svg aria-label="{captions.ALT_PLACEHOLDER}"></svg></figure>'
        '<p class="gf-caption">Grows as <span class="arithmatex">\\(N^2\\)</span>.</p>'
    )
    out, _ = captions.attach(page, PAGE)
    assert 'aria-label="Grows as N^2."' in out
