"""Inline values (gradflow_site/inline.py), and names rebound after the prose used them
(gradflow_site/rebinding.py)."""

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


@pytest.mark.build
def test_strict_build_fails_on_a_bad_inline_value(tmp_path):
    result = tiny_build(
        tmp_path,
        '# T\n\n```python exec="1" session="t"\nx = 1\n```\n\nGood `{python} x`, bad '
        "`{python} nope`.\n",
    )
    assert result.returncode == 1
    assert (
        "docs/index.md:7: inline value `{python} nope` raised NameError: name 'nope' is not "
        "defined" in result.stderr
    )


@pytest.mark.build
def test_strict_build_fails_on_a_name_rebound_after_the_prose_used_it(tmp_path):
    result = tiny_build(
        tmp_path,
        '# T\n\n```python exec="1" session="t"\ntotal = 100\n```\n\n`{python} total` steps.'
        '\n\n```python exec="1" session="t"\ntotal = 2 ** 19\n```\n\n`{python} 400 // total`'
        " times.\n",
    )
    assert result.returncode == 1
    assert (
        "docs/index.md:13: inline value `{python} 400 // total` reads `total`, bound by the block "
        "at docs/index.md:3 when the prose first used it at line 7; the block at docs/index.md:9 "
        "has rebound it since" in result.stderr
    )
