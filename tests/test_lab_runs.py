"""Execution of the rendered labs beside the chapters (gradflow_site/lab_runs.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gradflow_site import lab_runs
from tests._site import ROOT


def _notebook(path, source: str):
    cell = {"cell_type": "code", "execution_count": None, "id": "c0", "metadata": {}}
    nb = {
        "cells": [{**cell, "outputs": [], "source": source}],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def test_start_executes_the_lab_and_caches_it(tmp_path):
    nb = _notebook(tmp_path / "ok.ipynb", "print(6 * 7)")
    uri = "labs/run/ok.ipynb"
    run = lab_runs.start(uri, nb, tmp_path / "cache", "v1")
    lab_runs.wait(uri)
    outputs = json.loads((run.src_dir / uri).read_text())["cells"][0]["outputs"]
    assert "".join(outputs[0]["text"]) == "42\n"
    again = lab_runs.start(uri, nb, tmp_path / "cache", "v1")
    assert again.proc is None and again.src_dir == run.src_dir


def test_wait_raises_with_the_error_of_a_failing_cell(tmp_path):
    nb = _notebook(tmp_path / "bad.ipynb", "1 / 0")
    uri = "labs/run/bad.ipynb"
    run = lab_runs.start(uri, nb, None, "v1")
    try:
        with pytest.raises(RuntimeError, match="ZeroDivisionError"):
            lab_runs.wait(uri)
    finally:
        lab_runs.cleanup()  # what the build's on_post_build does
    assert not run.src_dir.exists(), "the executed copy's temporary folder was left behind"


def test_wait_reports_a_lab_whose_runner_cannot_start(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise FileNotFoundError("no such interpreter")

    monkeypatch.setattr(lab_runs.parallel, "can_fork", lambda: False)  # no fork: a new process
    monkeypatch.setattr(lab_runs.subprocess, "Popen", refuse)
    notebook = tmp_path / "x.ipynb"
    notebook.write_text("{}", encoding="utf-8")
    lab_runs.start("labs/run/x.ipynb", notebook, tmp_path / "cache", "v")
    with pytest.raises(RuntimeError, match="could not start.*no such interpreter"):
        lab_runs.wait("labs/run/x.ipynb")


LAB = """\
import atexit, pathlib, sys
%matplotlib inline
import matplotlib.pyplot as plt
print("out", plt.rcParams["lines.linewidth"]); print("err", file=sys.stderr)
atexit.register(pathlib.Path("lab-exit").write_text, "lab")
plt.plot([1, 2, 3])
6 * 7
"""

# in a process of its own, with no thread but the main one: start() forks there
FORKING = """\
import atexit, json, pathlib, sys
from gradflow_site import lab_runs, parallel
assert parallel.can_fork()
import matplotlib
matplotlib.rcParams["lines.linewidth"] = 9.0  # as the build's own matplotlibrc might
atexit.register(lambda: open("build-exit", "a").write("build\\n"))
run = lab_runs.start("labs/run/lab.ipynb", pathlib.Path(sys.argv[1]), None, "v")
assert run.pid is not None, "it did not fork"
lab_runs.wait("labs/run/lab.ipynb")
executed = json.loads((run.src_dir / "labs/run/lab.ipynb").read_text())
exited = (run.src_dir / "labs/run/lab-exit").read_text()
lab_runs.cleanup()
print(json.dumps([executed["cells"][0]["outputs"], exited]))
"""


@pytest.mark.long(seconds=4)
def test_a_forked_lab_gives_what_a_new_process_gives(tmp_path, monkeypatch):
    nb = _notebook(tmp_path / "lab.ipynb", LAB)
    forked = subprocess.run(
        [sys.executable, "-c", FORKING, nb],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert forked.returncode == 0, forked.stderr
    outputs, exited = json.loads(forked.stdout)
    # the build's exit handler ran once, in the build; the lab's ran in the lab's process
    assert (tmp_path / "build-exit").read_text() == "build\n"
    assert exited == "lab"

    monkeypatch.setattr(lab_runs.parallel, "can_fork", lambda: False)  # a new interpreter
    run = lab_runs.start("labs/run/fresh.ipynb", nb, None, "v")
    assert run.pid is None and run.proc is not None
    try:
        lab_runs.wait("labs/run/fresh.ipynb")
        fresh = json.loads((run.src_dir / "labs/run/fresh.ipynb").read_text())
    finally:
        lab_runs.cleanup()
    assert fresh["cells"][0]["outputs"] == outputs
    kinds = [(o["output_type"], o.get("name"), sorted(o.get("data", {}))) for o in outputs]
    assert kinds == [
        ("stream", "stdout", []),
        ("stream", "stderr", []),
        ("execute_result", None, ["text/plain"]),
        ("display_data", None, ["image/png", "text/plain"]),
    ]
    assert "".join(outputs[2]["data"]["text/plain"]) == "42" and outputs[2]["execution_count"] == 1
