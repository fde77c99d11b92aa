"""Every snippet file runs as a script, warnings as errors, and its sections are well formed.

On CPU the run is its lab's: tests/test_notebooks.py runs each chapter's notebook, whose code is
the snippet file's whole code (tests/test_labs.py), from an empty folder outside the checkout.
Here: every snippet file has such a lab, and on CUDA each file runs as a script.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests._site import ROOT

SNIPPETS = sorted((ROOT / "snippets").glob("*.py"))
MARKER = re.compile(r"^(\s*)# --8<-- \[(start|end):([A-Za-z0-9_\-]+)\]\s*$")


def run_snippet(path) -> subprocess.CompletedProcess:
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONWARNINGS="error", OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-W", "error", str(path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_every_snippet_runs_as_its_lab():
    from gradflow_site.labs import is_script
    from tests.test_labs import CHAPTERS

    # a script (train.py) has no lab: tests/test_<name>.py runs it as its readers do
    unrun = sorted(p.name for p in SNIPPETS if p.stem not in CHAPTERS and not is_script(p))
    assert not unrun, (
        f"{unrun}: a snippet file runs in the tests as its chapter's lab "
        "(tests/test_notebooks.py); give it a chapter page in mkdocs.yml's nav"
    )


@pytest.mark.cuda
@pytest.mark.parametrize("path", SNIPPETS, ids=lambda p: p.name)
def test_snippet_runs_on_cuda(path):
    result = run_snippet(path)  # it picks CUDA when it sees one
    assert result.returncode == 0, f"{path.name} failed on CUDA:\n{result.stdout}\n{result.stderr}"


@pytest.mark.parametrize("path", SNIPPETS, ids=lambda p: p.name)
def test_snippet_picks_its_device_once(path):
    text = path.read_text(encoding="utf-8")
    if re.search(r"^from train import ", text, re.M):
        # it trains through train.py, which picks the device (and each rank's GPU) itself
        assert "cuda" not in text, f"{path.name}: leave the device to train.py"
        return
    assert text.count('device = "cuda" if torch.cuda.is_available() else "cpu"') == 1, (
        f"{path.name}: choose the device once, in the first section that imports torch, with "
        '`device = "cuda" if torch.cuda.is_available() else "cpu"`, and use it everywhere'
    )


@pytest.mark.parametrize("path", SNIPPETS, ids=lambda p: p.name)
def test_snippet_sections_are_balanced_top_level_and_unique(path):
    open_name, seen = None, []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = MARKER.match(line)
        if not m:
            continue
        indent, kind, name = m.groups()
        where = f"{path.name}:{n}"
        assert not indent, f"{where}: section markers must be top level (no indentation)"
        if kind == "start":
            assert open_name is None, f"{where}: '{name}' starts inside '{open_name}'"
            assert name not in seen, f"{where}: section '{name}' is defined twice"
            open_name = name
            seen.append(name)
        else:
            assert open_name == name, f"{where}: end of '{name}' but '{open_name}' is open"
            open_name = None
    assert open_name is None, f"{path.name}: section '{open_name}' never ends"
    assert seen, f"{path.name} has no named sections"
