"""Background execution of the rendered labs (gradflow_site/lab_runs.py)."""

from __future__ import annotations

import json

import pytest

from gradflow_site import lab_runs


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

    monkeypatch.setattr(lab_runs.subprocess, "Popen", refuse)
    notebook = tmp_path / "x.ipynb"
    notebook.write_text("{}", encoding="utf-8")
    lab_runs.start("labs/run/x.ipynb", notebook, tmp_path / "cache", "v")
    with pytest.raises(RuntimeError, match="could not start.*no such interpreter"):
        lab_runs.wait("labs/run/x.ipynb")
