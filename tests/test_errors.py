"""Build errors name the Markdown file and line (and the snippet line), once."""

from __future__ import annotations

import pytest

from gradflow_site import errors
from tests._site import tiny_build


def raised(code: str) -> BaseException:
    try:
        exec(compile(code, "<code block: session t; n1>", "exec"), {})  # noqa: S102
    except Exception as err:  # noqa: BLE001
        return err
    raise AssertionError("the code did not raise")


def test_explain_names_the_markdown_line():
    md = '# T\n\n```python exec="1" session="t"\nx = 1\ny = nope + x\n```\n'
    errors.register_page(md, "docs/t.md", offset=2)
    code = "x = 1\ny = nope + x"
    message = errors.explain(code, raised(code), "fallback")
    assert message.startswith(errors.MARKER + "docs/t.md:7: the executed block raised NameError")
    assert "y = nope + x" in message


def test_explain_names_the_snippet_line(tmp_path):
    snippet = tmp_path / "s.py"
    snippet.write_text("# --8<-- [start:a]\nok = 1\nbad = ok / 0\n# --8<-- [end:a]\n")
    md = f'```python exec="1" source="above" session="t"\n--8<-- "{snippet}:a"\n```\n'
    errors.register_page(md, "docs/t.md")
    code = "ok = 1\nbad = ok / 0"
    message = errors.explain(code, raised(code), "fallback")
    assert f"docs/t.md:1 ({snippet}:3): the executed block raised ZeroDivisionError" in message


def test_explain_falls_back_for_an_unknown_block():
    assert errors.explain("never registered = 1", None, "markdown-exec's") == "markdown-exec's"


def test_check_includes_names_a_missing_section():
    md = 'x\n```python\n--8<-- "snippets/telephone.py:nope"\n```\n'
    new, problems = errors.check_includes(md, "docs/t.md", offset=1)
    assert problems == [
        "docs/t.md:4: includes section 'nope' of snippets/telephone.py, which has no such "
        "section (it has: " + problems[0].split("(it has: ")[1]
    ]
    assert "hand_calc" in problems[0]
    assert "--8<--" not in new


def test_check_includes_names_a_missing_file():
    _, problems = errors.check_includes('--8<-- "snippets/none.py:a"\n', "docs/t.md")
    assert problems == ["docs/t.md:1: includes snippets/none.py, which does not exist."]


@pytest.mark.build
def test_strict_build_reports_a_raising_block_once(tmp_path):
    result = tiny_build(
        tmp_path,
        '# T\n\n```python exec="1" session="t"\nx = 1\ny = nope\n```\n\n'
        '```python exec="1" session="t"\nprint(y)\n```\n\nValue `{python} y`.\n',
    )
    warnings = [line for line in result.stderr.splitlines() if line.startswith("WARNING")]
    assert result.returncode == 1
    assert warnings == [
        "WARNING -  docs/index.md:5: the executed block raised NameError: name 'nope' is not "
        "defined"
    ]
    assert "Traceback" not in result.stderr


WAIT_FOR_THE_FORK = """import time
from gradflow_site import parallel
claim = parallel._state["dir"] / f"{parallel._name('zz.md')}.claim"
deadline = time.monotonic() + 60
while not claim.exists() and time.monotonic() < deadline:
    time.sleep(0.01)
"""


@pytest.mark.build
def test_strict_build_reports_a_block_that_raised_in_the_parallel_fork(tmp_path):
    # the fork renders the last page (gradflow_site/parallel.py): it hands over the block that
    # ran, and the build runs the raising one itself and reports it, once. The first page
    # waits until the fork has claimed the last, or on a busy machine the build could reach
    # the last page first and render it itself (the test would then see no fork at all).
    result = tiny_build(
        tmp_path,
        {
            "index.md": '# A\n\n```python exec="1"\n' + WAIT_FOR_THE_FORK + "print(1)\n```\n",
            "zz.md": '# Z\n\n```python exec="1" session="z"\nx = 1\n```\n\n'
            '```python exec="1" session="z"\ny = x + nope\n```\n',
        },
    )
    warnings = [line for line in result.stderr.splitlines() if line.startswith("WARNING")]
    assert result.returncode == 1
    assert "1 in a parallel fork" in result.stderr
    assert warnings == [
        "WARNING -  docs/zz.md:8: the executed block raised NameError: name 'nope' is not defined"
    ]
