"""The pre-commit checks hold on the whole tree: ruff lint and format, and the Markdown check."""

import subprocess
import sys

from tests._site import ROOT


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_python_passes_ruff_check():
    result = _run("ruff", "check", "--output-format", "concise", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_python_is_ruff_formatted():
    result = _run("ruff", "format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_markdown_passes_pymarkdown():
    result = _run(
        "pymarkdown", "--config", ".pymarkdown.json", "scan", "docs", "README.md", "CONTRIBUTING.md"
    )
    assert result.returncode == 0, result.stdout + result.stderr
