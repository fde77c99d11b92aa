"""Drift guard: every Python block in docs/ is executed at build or included from a tested file."""

from __future__ import annotations

import re

from tests._site import ROOT

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^\n`]*)$")
PYTHON = {"python", "py", "python3", "pycon", "py3"}
INCLUDE = re.compile(r'^\s*--8<--\s+"(?P<file>[^":]+)(?::(?P<section>[\w\-]+))?"\s*$')
EXECUTED = re.compile(r'\bexec="(1|true|yes|on)"')


def code_blocks(text: str):
    """Yield (line number, info string, body lines) for every fenced block in Markdown text."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, start = m.group("fence"), i
        body = []
        i += 1
        while i < len(lines) and not re.match(rf"^\s*{fence[0]}{{{len(fence)},}}\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        yield start + 1, m.group("info").strip(), body
        i += 1


def drift(text: str) -> list[tuple[int, str]]:
    """Return (line, reason) for each Python block that is neither executed nor included."""
    problems = []
    for line, info, body in code_blocks(text):
        lang = info.split()[0].lstrip(".{").lower() if info else ""
        if lang not in PYTHON or EXECUTED.search(info):
            continue
        code = [b for b in body if b.strip()]
        includes = [INCLUDE.match(b) for b in code]
        if not code or not all(includes):
            problems.append((line, 'Python block neither executed (exec="1") nor included'))
            continue
        for m in includes:
            path = ROOT / m.group("file")
            if path.parent != ROOT / "snippets" or path.suffix != ".py" or not path.exists():
                problems.append((line, f"includes {m.group('file')}, not a tested snippet file"))
    return problems


def test_drift_guard_accepts_executed_and_included_blocks():
    text = (
        '```python exec="1"\nprint(1)\n```\n\n'
        '```python\n--8<-- "snippets/telephone.py:chain"\n```\n'
    )
    assert drift(text) == []


def test_drift_guard_rejects_a_typed_python_block():
    text = "Intro\n\n    ```python\n    x = 1\n    ```\n"
    assert drift(text) == [(3, 'Python block neither executed (exec="1") nor included')]


def test_drift_guard_rejects_an_include_from_an_untested_file():
    assert drift('```py\n--8<-- "docs/x.py:a"\n```\n')[0][1].startswith("includes docs/x.py")


def test_docs_have_no_python_block_that_can_drift():
    problems = [
        f"{page.relative_to(ROOT)}:{line}: {why}"
        for page in sorted((ROOT / "docs").rglob("*.md"))
        for line, why in drift(page.read_text(encoding="utf-8"))
    ]
    assert not problems, "\n".join(problems)
