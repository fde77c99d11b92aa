"""Inline values, Markdown quizzes and captions (gradflow_site/inline.py)."""

from __future__ import annotations

import textwrap

import pytest

from gradflow_site import inline
from tests._site import tiny_build

PAGE = "docs/x.md"


def run_blocks(markdown: str) -> str:
    """Run the hidden blocks `transform` inserted, as markdown-exec would, and join outputs."""
    namespace: dict = {}
    out = []
    for block in markdown.split("```python")[1:]:
        code = block.split("\n", 1)[1].split("```", 1)[0]
        code = textwrap.dedent(code)
        if "record(" in code:
            import contextlib
            import io

            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                exec(code, namespace)  # noqa: S102
            out.append(buf.getvalue())
        else:
            exec(code, namespace)  # noqa: S102
    return "".join(out).strip()


def test_transform_evaluates_after_the_block_above():
    md = (
        '```python exec="1" session="s"\nx = 1\n```\n\nx is `{python} x`.\n\n'
        '```python exec="1" session="s"\nx = 2\n```\n\nnow `{python} f"{x:.1f}"`.\n'
    )
    new, problems = inline.transform(md, PAGE)
    assert problems == []
    html = "<p>x is @@gfi-0@@.</p><p>now @@gfi-1@@.</p>" + run_blocks(new)
    filled, problems = inline.substitute(html, new, PAGE)
    assert problems == []
    assert filled.strip() == "<p>x is 1.</p><p>now 2.0.</p>"


def test_transform_uses_the_blocks_session():
    md = 'A\n\n```python exec="1" session="mine"\nx = 1\n```\n\n`{python} x`\n'
    new, _ = inline.transform(md, PAGE)
    assert new.count('session="mine"') == 2


def test_substitute_reports_a_raising_expression_with_file_and_line():
    md = '---\n```python exec="1" session="s"\nx = 1\n```\n\nbad `{python} y + 1`\n'
    new, _ = inline.transform(md, PAGE, offset=3)
    _, problems = inline.substitute("<p>@@gfi-0@@</p>" + run_blocks(new), new, PAGE)
    assert problems == [
        "docs/x.md:9: inline value `{python} y + 1` raised NameError: name 'y' is not defined"
    ]


def test_substitute_escapes_values():
    md = '```python exec="1" session="s"\nx = "<b>"\n```\n\n`{python} x`\n'
    new, _ = inline.transform(md, PAGE)
    filled, _ = inline.substitute("@@gfi-0@@" + run_blocks(new), new, PAGE)
    assert filled == "&lt;b&gt;"


def test_transform_rejects_a_value_in_a_heading():
    _, problems = inline.transform("## Norm `{python} 1`\n", PAGE)
    assert problems and problems[0].startswith("docs/x.md:1: an inline value cannot sit in")


def test_transform_leaves_code_blocks_alone():
    md = "```text\n`{python} x`\n```\n"
    assert inline.transform(md, PAGE) == (md, [])


def test_quiz_becomes_the_interactive_quiz():
    md = (
        '!!! quiz "Q"\n\n    Which?\n\n    - [ ] One\n        No.\n'
        "    - [x] Two\n        Yes,\n        two.\n"
    )
    new, problems = inline.quizzes(md, PAGE)
    assert problems == []
    assert '!!! question "Q"' in new
    assert '    ??? quiz "A. One"\n\n        **Not this one.** No.' in new
    assert '    ??? quiz "B. Two"\n\n        **Correct.** Yes,\n        two.' in new


@pytest.mark.parametrize("marks", [" ,  ", "x,x"])
def test_quiz_needs_exactly_one_right_answer(marks):
    a, b = marks.split(",")
    md = f"!!! quiz\n\n    Q?\n\n    - [{a}] One\n        No.\n    - [{b}] Two\n        No.\n"
    _, problems = inline.quizzes(md, PAGE)
    assert problems and "exactly one marked right" in problems[0]


def test_quiz_choice_needs_an_explanation():
    md = "!!! quiz\n\n    Q?\n\n    - [ ] One\n    - [x] Two\n        Yes.\n"
    _, problems = inline.quizzes(md, PAGE)
    assert problems and "'One' has no explanation" in problems[0]


def test_caption_moves_into_the_figure_and_names_it():
    page = (
        f'<figure class="gf-figure"><svg aria-label="{inline.ALT_PLACEHOLDER}"></svg></figure>'
        '\n<p class="gf-caption"><strong>Norms.</strong> Fall &amp; rise.</p>'
    )
    out, problems = inline.attach_captions(page, PAGE)
    assert problems == []
    assert out == (
        '<figure class="gf-figure"><svg aria-label="Norms. Fall &amp; rise."></svg>'
        "<figcaption><strong>Norms.</strong> Fall &amp; rise.</figcaption></figure>"
    )


def test_caption_titles_a_widget_from_its_bold_lead():
    t = inline.TITLE_PLACEHOLDER
    page = (
        f'<figure class="gf-widget" aria-label="{t}"><p class="gf-widget__title">{t}</p>'
        f'<div><figure class="gf-figure"><svg aria-label="{inline.ALT_PLACEHOLDER}"></svg>'
        '</figure></div></figure><p class="gf-caption"><strong>Clip it.</strong> Drag.</p>'
    )
    out, problems = inline.attach_captions(page, PAGE)
    assert problems == []
    assert 'aria-label="Clip it"' in out and '<p class="gf-widget__title">Clip it</p>' in out
    assert out.endswith("</figure></div><figcaption>Drag.</figcaption></figure>")


def test_figure_without_caption_is_a_problem():
    page = f'<figure class="gf-figure"><svg aria-label="{inline.ALT_PLACEHOLDER}"></svg></figure>'
    _, problems = inline.attach_captions(page, PAGE)
    assert problems == [
        "docs/x.md: a figure has no caption. Write its caption as a paragraph followed by "
        "`{: .gf-caption }` directly after the block that prints it."
    ]


def test_caption_without_figure_is_a_problem():
    _, problems = inline.attach_captions('<p>x</p><p class="gf-caption">Lost.</p>', PAGE)
    assert problems and "has no figure or widget right above it" in problems[0]


@pytest.mark.build
def test_strict_build_fails_on_a_bad_inline_value(tmp_path, build_runner):
    result = tiny_build(
        tmp_path,
        '# T\n\n```python exec="1" session="t"\nx = 1\n```\n\nGood `{python} x`, bad '
        "`{python} nope`.\n",
        runner=build_runner,
    )
    assert result.returncode == 1
    assert (
        "docs/index.md:7: inline value `{python} nope` raised NameError: name 'nope' is not "
        "defined" in result.stderr
    )


def test_caption_text_drops_tex_delimiters_from_the_accessible_name():
    page = (
        f'<figure class="gf-figure"><svg aria-label="{inline.ALT_PLACEHOLDER}"></svg></figure>'
        '<p class="gf-caption">Grows as <span class="arithmatex">\\(N^2\\)</span>.</p>'
    )
    out, _ = inline.attach_captions(page, PAGE)
    assert 'aria-label="Grows as N^2."' in out
