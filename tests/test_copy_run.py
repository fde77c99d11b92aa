"""Shown code runs as copied: every page's visible Python, joined in page order, runs alone.

For each chapter, the Python blocks a reader sees (executed blocks shown with `source=`, and
plain Python blocks), with their snippet includes expanded, are joined in page order into one
file and run in an empty folder where only the installed `gradflow_ref`, torch, matplotlib and
numpy can be imported (and train.py, for a page that imports it as its reader saves it
beside the code): `gradflow_site`, `snippets` and `tests` are blocked and the checkout is
off `sys.path`, in a process forked from one that has imported only torch, numpy and matplotlib
(tests/_forkrun.py). Each executed block must print what the built page shows (timings aside).
"""

from __future__ import annotations

import json
import re
import subprocess
import textwrap

import pytest

from gradflow_site.labs import companions
from tests._forkrun import reader_env
from tests._site import ROOT
from tests.test_drift import PYTHON, code_blocks

PAGES = sorted((ROOT / "docs").glob("*.md"))
INCLUDE = re.compile(r'^(?P<indent>\s*)--8<--\s+"(?P<file>[^":]+)(?::(?P<section>[\w\-]+))?"\s*$')
SOURCE = re.compile(r"""\bsource\s*=\s*["']?(?!["'])""")
EXECUTED = re.compile(r"""\bexec\s*=\s*["']?(?:1|true|yes|on)\b""", re.I)
MARK = "@@gf-copy-run-block-{}@@"
TIMING = re.compile(r"\d+(?:\.\d+)?(?=\s*(?:ms|s|µs|us|seconds?|sec|min)\b)")

BOOTSTRAP = """
import importlib.abc, os, runpy, sys
ROOT = {root!r}
class ReadersDoNotHave(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("gradflow_site", "snippets", "tests"):
            raise ModuleNotFoundError(
                f"No module named {{name!r}}: a reader has only gradflow_ref installed"
            )
        return None
sys.meta_path.insert(0, ReadersDoNotHave())
sys.path[:] = [p for p in sys.path if p and p.rstrip("/") != ROOT]
sys.path.insert(0, os.getcwd())  # as `python page.py` puts the script's folder first
runpy.run_path("page.py", run_name="__main__")
"""


def section(path: str, name: str | None) -> str:
    """Return a snippet file, or one of its named sections, as pymdownx.snippets includes it."""
    text = (ROOT / path).read_text(encoding="utf-8")
    if name is None:
        return "\n".join(
            line for line in text.splitlines() if not line.lstrip().startswith("# --8<--")
        )
    m = re.search(
        rf"^[ \t]*# --8<-- \[start:{re.escape(name)}\][^\n]*\n(.*?)^[ \t]*# --8<-- "
        rf"\[end:{re.escape(name)}\]",
        text,
        re.M | re.S,
    )
    assert m, f"{path} has no section {name!r}"
    return textwrap.dedent(m.group(1))


def shown_blocks(page) -> list[tuple[int, bool, str]]:
    """Return (line, executed, code) for every Python block a reader sees on `page`."""
    out = []
    for line, info, body in code_blocks(page.read_text(encoding="utf-8")):
        lang = info.split()[0].lstrip(".{").lower() if info else ""
        executed = bool(EXECUTED.search(info))
        if lang not in PYTHON or (executed and not SOURCE.search(info)):
            continue
        code = []
        for raw in textwrap.dedent("\n".join(body)).splitlines():
            m = INCLUDE.match(raw)
            code.append(section(m.group("file"), m.group("section")) if m else raw)
        out.append((line, executed, "\n".join(code).strip("\n")))
    return out


def masked(text: str) -> str:
    return TIMING.sub("#", text).strip()


def run_as_copied(
    page, workdir, forkrun
) -> tuple[subprocess.CompletedProcess, list[tuple[int, bool]]]:
    blocks = shown_blocks(page)
    script = []
    for n, (_line, _executed, code) in enumerate(blocks):
        script += [f"print({MARK.format(n)!r})", code]
    (workdir / "page.py").write_text("\n".join(script) + "\n", encoding="utf-8")
    (workdir / "bootstrap.py").write_text(BOOTSTRAP.format(root=str(ROOT)), encoding="utf-8")
    # a snippet file the page imports as a module (the arena's train.py), saved beside it as the
    # page tells its reader to
    for name, text in companions("\n".join(code for _, _, code in blocks)).items():
        (workdir / name).write_text(text, encoding="utf-8")
    result = forkrun.run("bootstrap.py", workdir, reader_env(CUDA_VISIBLE_DEVICES=""))
    return result, [(line, executed) for line, executed, _ in blocks]


@pytest.mark.build
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_shown_code_runs_as_copied(page, tmp_path, site, forkrun):
    result, blocks = run_as_copied(page, tmp_path, forkrun)
    rel = page.relative_to(ROOT)
    assert result.returncode == 0, (
        f"{rel}: the shown code, copied in page order into an empty folder, fails:\n"
        f"{result.stderr[-3000:]}"
    )
    # what each shown executed block printed on the built page (the shared strict build's run)
    record = site.parent / f"{site.name}.runs" / f"{page.stem}.json"
    run = json.loads(record.read_text(encoding="utf-8")) if record.exists() else {"cells": []}
    expected = [
        out.get("output", "")
        for cell, out in zip(run["cells"], run.get("outputs", []))
        if cell["kind"] == "block" and cell["shown"]
    ]
    parts = re.split(r"@@gf-copy-run-block-(\d+)@@\n", result.stdout)[1:]
    printed = dict(zip(parts[::2], parts[1::2]))
    got = [printed.get(str(n), "") for n, (_, executed) in enumerate(blocks) if executed]
    assert len(got) == len(expected), (
        f"{rel}: {len(got)} executed blocks are shown, but the build recorded {len(expected)}"
    )
    lines = [line for line, executed in blocks if executed]
    for line, mine, theirs in zip(lines, got, expected):
        assert masked(mine) == masked(theirs), (
            f"{rel}:{line}: copied code prints something else than the page shows\n"
            f"--- page ---\n{theirs}\n--- copied ---\n{mine}"
        )


def test_shown_blocks_expand_includes_and_skip_hidden_blocks(tmp_path):
    page = tmp_path / "p.md"
    page.write_text(
        '```python exec="1" source="above" session="s"\n--8<-- "snippets/telephone.py:'
        'hand_calc"\n```\n\n```python exec="1" session="s"\nhidden = 1\n```\n\n'
        "```python\nprint(2)\n```\n",
        encoding="utf-8",
    )
    blocks = shown_blocks(page)
    assert [(b[0], b[1]) for b in blocks] == [(1, True), (9, False)]
    assert blocks[0][2] == section("snippets/telephone.py", "hand_calc").strip("\n")
    assert blocks[1][2] == "print(2)"


def test_copy_run_blocks_gradflow_site(tmp_path, forkrun):
    page = tmp_path / "p.md"
    page.write_text("```python\nimport gradflow_site\n```\n", encoding="utf-8")
    result, _ = run_as_copied(page, tmp_path, forkrun)
    assert result.returncode != 0
    assert "a reader has only gradflow_ref installed" in result.stderr


def test_masked_hides_timings_only():
    assert masked("step 3 took 12.5 ms, loss 0.25") == "step 3 took # ms, loss 0.25"
