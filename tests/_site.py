"""Build helpers shared by the site tests: run mkdocs in a subprocess and capture its log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def mkdocs_build(
    site_dir: Path, config: Path | None = None, timeout: int = 240, cache: bool = False
):
    """Run `mkdocs build --strict` from the repository root; return the CompletedProcess.

    The execution cache is off unless `cache` is true: tests build clean, as CI does.
    """
    tmp = Path(f"{site_dir}.tmp")
    tmp.mkdir(parents=True, exist_ok=True)
    env = dict(
        os.environ,
        NO_MKDOCS_2_WARNING="1",
        MPLBACKEND="Agg",
        OMP_NUM_THREADS="1",
        GRADFLOW_EXEC_CACHE="1" if cache else "0",
        # what every shown code block printed, for tests/test_copy_run.py
        GRADFLOW_SHOWN_BLOCKS=f"{site_dir}.shown.json",
        # a temporary directory of its own: tests/test_leftovers.py checks it is left empty
        TMPDIR=str(tmp),
    )
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)]
    if config is not None:
        cmd += ["--config-file", str(config)]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def child_config(
    tmp: Path, pages: dict[str, str], nav: list[str] | None = None, extra: str = ""
) -> Path:
    """Write a config that inherits mkdocs.yml but builds `pages` (name -> Markdown) instead."""
    docs = tmp / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for name, text in pages.items():
        (docs / name).write_text(text, encoding="utf-8")
    nav = list(pages) if nav is None else nav
    cfg = tmp / "mkdocs.yml"
    cfg.write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\n"
        f"docs_dir: {docs}\n"
        f"hooks: [{ROOT / 'gradflow_site' / 'hooks.py'}]\n"
        "extra_css: []\nextra_javascript: []\nwatch: []\nextra:\n  polyfills: []\n"
        "nav:\n" + "".join(f"  - {p}\n" for p in nav) + extra,
        encoding="utf-8",
    )
    return cfg


def tiny_build(tmp: Path, page: str) -> subprocess.CompletedProcess:
    """Build a one-page site with only the hooks and markdown-exec; return the process.

    For tests of the build's own messages: seconds instead of the whole guide's build.
    """
    (tmp / "docs").mkdir(parents=True, exist_ok=True)
    (tmp / "docs" / "index.md").write_text(page, encoding="utf-8")
    (tmp / "mkdocs.yml").write_text(
        "site_name: t\nstrict: true\nplugins: [markdown-exec]\n"
        f"hooks: [{ROOT / 'gradflow_site' / 'hooks.py'}]\n"
        "markdown_extensions: [admonition, attr_list, pymdownx.details, pymdownx.superfences]\n",
        encoding="utf-8",
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), GRADFLOW_EXEC_CACHE="0", NO_MKDOCS_2_WARNING="1")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict"],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
