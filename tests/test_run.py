"""gradflow_site.run: a chapter's cells, run once in page order, cached by every file it read."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gradflow_site import cells, run, worker

PAGE = """# A page

Before any block: `{python} 1 + 1`.

```python exec="1" source="above" result="text" session="p"
x = 3
print(f"x is {x}")
```

Here x is `{python} x` and twice that `{python} 2 * x`.

```text
`{python} not_a_value` inside a plain code block
```

    ```python exec="1" session="p"
    x = 5
    ```

Now x is `{python} x`.
"""


def test_cells_put_each_value_after_the_block_above_it():
    page_cells = cells.cells(PAGE.split("\n"))
    assert [(c.kind, c.code) for c in page_cells] == [
        ("value", "1 + 1"),
        ("block", 'x = 3\nprint(f"x is {x}")'),
        ("value", "x"),
        ("value", "2 * x"),
        ("block", "x = 5"),
        ("value", "x"),
    ]
    assert {c.session for c in page_cells} == {"p"}
    assert [c.shown for c in page_cells if c.kind == "block"] == [True, False]


def test_cells_name_the_line_of_each_block_and_value():
    page_cells = cells.cells(PAGE.split("\n"), [f"docs/p.md:{n}" for n in range(1, 40)])
    assert page_cells[0].where == ["docs/p.md:3"]
    assert page_cells[1].where == ["docs/p.md:5", "docs/p.md:6", "docs/p.md:7"]


def test_page_cells_trace_an_include_to_its_snippet_lines(tmp_path):
    text = '# T\n\n```python exec="1" session="t"\n--8<-- "snippets/telephone.py:chain"\n```\n'
    expanded = {}

    def expand(lines):
        expanded["asked"] = lines
        return ["import torch", "y = 1"]

    (cell,) = cells.page_cells(text, "docs/t.md", expand)
    assert expanded["asked"] == ['--8<-- "snippets/telephone.py:chain"']
    assert cell.code == "import torch\ny = 1"
    assert cell.where[0] == "docs/t.md:3"
    # two lines expanded but the section has others: traced to the include line instead
    assert all(w.startswith(("snippets/telephone.py:", "docs/t.md:4")) for w in cell.where[1:])


def test_page_cells_name_a_broken_include_with_page_and_line():
    def expand(lines):
        raise RuntimeError("Snippet section 'nope' could not be located")

    text = (
        '---\ntitle: x\n---\n# T\n\n```python exec="1"\n--8<-- "snippets/telephone.py:nope"\n```\n'
    )
    with pytest.raises(ValueError, match=r"docs/t\.md:7: includes snippets/telephone\.py:nope"):
        cells.page_cells(text, "docs/t.md", expand)


def test_a_value_shows_the_name_as_the_page_has_it_at_that_point():
    out = worker.run_page("docs/p.md", cells.cells(PAGE.split("\n")), track=False)["outputs"]
    assert out == [
        {"value": "2"},
        {"output": "x is 3\n"},
        {"value": "3"},
        {"value": "6"},
        {"output": ""},
        {"value": "5"},
    ]


def test_every_session_starts_from_the_same_seed():
    page = (
        '```python exec="1" session="a"\nimport torch\nprint(torch.rand(1).item())\n```\n\n'
        '```python exec="1" session="b"\nimport torch\nprint(torch.rand(1).item())\n```\n'
    )
    a, b = worker.run_page("docs/s.md", cells.cells(page.split("\n")), track=False)["outputs"]
    assert a == b


def test_a_raising_block_is_reported_once_and_its_session_stops():
    page = '```python exec="1" session="e"\ny = 1\nraise KeyError("k")\n```\n\n`{python} y`\n'
    page_cells = cells.cells(page.split("\n"), [f"docs/e.md:{n}" for n in range(1, 10)])
    done = worker.run_page("docs/e.md", page_cells, track=False)
    error, skipped = done["outputs"]
    assert error["error"].startswith("docs/e.md:3: the executed block raised KeyError: 'k'")
    assert "raise KeyError" in error["error"]
    assert skipped == {"skipped": True} and done["failed"]


def test_a_block_that_exits_is_reported_and_does_not_end_the_build():
    page_cells = cells.cells(['```python exec="1" session="x"', "raise SystemExit(2)", "```"])
    (out,) = worker.run_page("docs/x.md", page_cells, track=False)["outputs"]
    assert "raised SystemExit: 2" in out["error"]


def test_a_raising_value_names_its_line_and_expression():
    page_cells = cells.cells(["Text `{python} 1 / 0` here."], ["docs/v.md:9"])
    (out,) = worker.run_page("docs/v.md", page_cells, track=False)["outputs"]
    assert out["error"] == (
        "docs/v.md:9: inline value `{python} 1 / 0` raised ZeroDivisionError: division by zero"
    )


def test_print_is_captured_as_markdown_exec_captures_it():
    page_cells = cells.cells(['```python exec="1"', 'print("a", 1, sep="-", end="!")', "```"])
    (out,) = worker.run_page("docs/x.md", page_cells, track=False)["outputs"]
    assert out == {"output": "a 1!"}  # markdown-exec joins with a space, whatever `sep`


READS = """
import json
from gradflow_site import cells, run
page = [
    '```python exec="1" session="r"',
    "from gradflow_ref import telephone",
    "from pathlib import Path",
    "text = Path('gradflow_ref/data/SOURCE.md').read_text()",
    "```",
]
print(json.dumps(run.result(cells.cells(page), "docs/r.md")))
"""


def test_a_run_names_the_repository_files_it_read():
    # in a build of its own: the pool's processes end with it
    env = dict(os.environ, GRADFLOW_EXEC_CACHE="0", GRADFLOW_WORKERS="1")
    got = subprocess.run(
        [sys.executable, "-c", READS], cwd=run.ROOT, env=env, capture_output=True, text=True
    )
    assert got.returncode == 0, got.stderr
    path, done = json.loads(got.stdout)
    assert path == "docs/r.md" and done["outputs"] == [{"output": ""}]
    assert {"gradflow_ref/telephone.py", "gradflow_ref/data/SOURCE.md"} <= set(done["reads"])
    assert all(not r.startswith((".venv", ".cache", "tests/")) for r in done["reads"])


def test_a_cached_run_is_stale_once_a_file_it_read_changes(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "ROOT", tmp_path)
    (tmp_path / "data.txt").write_text("one")
    done = {"reads": {"data.txt": run._sha(tmp_path / "data.txt")}}
    assert run._fresh(done)
    (tmp_path / "data.txt").write_text("two!")
    assert not run._fresh(done)
    (tmp_path / "data.txt").unlink()
    assert not run._fresh(done)


def test_the_key_changes_with_the_code_not_with_the_lines():
    a = cells.cells(PAGE.split("\n"))
    b = cells.cells(("\n\n" + PAGE).split("\n"))
    c = cells.cells(PAGE.replace("x = 5", "x = 6").split("\n"))
    assert cells.key(a) == cells.key(b) != cells.key(c)
