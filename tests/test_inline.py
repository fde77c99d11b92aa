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
        '```python exec="1" session="s"\nxs = [1]\n```\n\n`{python} len(xs)` item.\n\n'
        '```python exec="1" session="s"\nxs.append(2)\n```\n\nnow `{python} f"{len(xs):.1f}"`.\n'
    )
    new, problems = inline.transform(md, PAGE)
    assert problems == []
    html = "<p>@@gfi-0@@ item.</p><p>now @@gfi-1@@.</p>" + run_blocks(new)
    filled, problems = inline.substitute(html, new, PAGE)
    assert problems == []
    assert filled.strip() == "<p>1 item.</p><p>now 2.0.</p>"


def block(code: str, shown: bool = True, session: str = "s") -> str:
    source = ' source="above"' if shown else ""
    return f'```python exec="1"{source} session="{session}"\n{code}\n```\n\n'


def test_transform_reports_a_name_rebound_after_the_prose_used_it():
    md = (
        block("total = 100")  # lines 1-3
        + "Ran `{python} total` steps.\n\n"  # line 5
        + block("total = 524288")  # lines 7-9
        + "B: `{python} 400 // total` times too fast.\n"  # line 11
    )
    _, problems = inline.transform(md, PAGE, offset=2)
    assert problems == [
        "docs/x.md:13: inline value `{python} 400 // total` reads `total`, bound by the block "
        "at docs/x.md:3 when the prose first used it at line 7; the block at docs/x.md:9 has "
        "rebound it since, so this shows that block's value. Fix: give `total` a distinct "
        "name in one of the two blocks."
    ]


def test_transform_names_the_snippet_section_that_rebound_a_name():
    md = (
        block("B = 1")
        + "`{python} B`\n\n"
        + block('--8<-- "snippets/accumulation.py:effective_batch"')
        + "`{python} B`\n"
    )
    _, problems = inline.transform(md, PAGE)
    assert len(problems) == 1
    assert "the block at docs/x.md:7 (snippets/accumulation.py:effective_batch)" in problems[0]


def test_transform_reports_a_builder_call_reading_a_rebound_name():
    md = (
        block("n = 3")
        + "`{python} n` layers.\n\n"
        + block("n = 4")
        + block("print(table(n))", shown=False)
    )
    _, problems = inline.transform(md, PAGE)
    assert len(problems) == 1
    assert problems[0].startswith("docs/x.md:11: this block reads `n`, bound by the block at")


def test_transform_lets_shown_code_rebind_and_read_a_name():
    md = block("x = 0") + "`{python} x`\n\n" + block("x = 5") + block("print(x + 1)")
    assert inline.transform(md, PAGE)[1] == []


def test_transform_lets_a_block_rebind_a_name_before_the_prose_uses_it():
    md = block("total = 100") + block("total = 5") + "`{python} total`\n\n`{python} total`\n"
    assert inline.transform(md, PAGE)[1] == []


def test_transform_ignores_names_local_to_the_expression():
    md = (
        block("lrs = [0.0, 1.0]")
        + "`{python} sum(lr == 0 for lr in lrs)`\n\n"
        + block("lr = 3e-4")
        + "`{python} sum(lr == 0 for lr in lrs)`\n"
    )
    assert inline.transform(md, PAGE)[1] == []


def test_transform_keeps_sessions_apart():
    md = block("k = 1") + "`{python} k`\n\n" + block("k = 2", session="other") + "`{python} k`\n"
    assert inline.transform(md, PAGE)[1] == []


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


@pytest.mark.build
def test_strict_build_fails_on_a_name_rebound_after_the_prose_used_it(tmp_path, build_runner):
    result = tiny_build(
        tmp_path,
        '# T\n\n```python exec="1" session="t"\ntotal = 100\n```\n\n`{python} total` steps.'
        '\n\n```python exec="1" session="t"\ntotal = 2 ** 19\n```\n\n`{python} 400 // total`'
        " times.\n",
        runner=build_runner,
    )
    assert result.returncode == 1
    assert (
        "docs/index.md:13: inline value `{python} 400 // total` reads `total`, bound by the block "
        "at docs/index.md:3 when the prose first used it at line 7; the block at docs/index.md:9 "
        "has rebound it since" in result.stderr
    )


def test_caption_text_drops_tex_delimiters_from_the_accessible_name():
    page = (
        f'<figure class="gf-figure"><svg aria-label="{inline.ALT_PLACEHOLDER}"></svg></figure>'
        '<p class="gf-caption">Grows as <span class="arithmatex">\\(N^2\\)</span>.</p>'
    )
    out, _ = inline.attach_captions(page, PAGE)
    assert 'aria-label="Grows as N^2."' in out
