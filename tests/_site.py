"""Site builds for the tests, and a test run that tidies up after itself.

`mkdocs_build` runs `mkdocs build --strict` in a new process; `child_config` and `tiny_build`
write small sites, for tests of a page or of a build's messages. `start_run` gives a test run a
TMPDIR of its own and an environment tag that every child inherits; `finish_run` lists the files
and tagged processes the run left behind, then removes the folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
HOOKS = f"{ROOT}/gradflow_site/hooks.py"  # mkdocs.yml's
TAG = "GRADFLOW_TEST_RUN"  # the environment variable every process of one test run carries


def mkdocs_build(site_dir: Path, config=None, timeout=900, workers=0):
    """Run a clean `mkdocs build --strict` (`workers`: processes that run the chapters, 0 for
    one per core) with a TMPDIR beside `site_dir` and the tag GRADFLOW_BUILD=site_dir
    (tests/test_leftovers.py checks both); return the process. The chapters' runs are cached in
    a new `<site_dir>.cache/` (tests/test_zensical.py builds from it) and recorded in
    `<site_dir>.runs/` (tests/test_copy_run.py reads them)."""
    # a short TMPDIR (the build's fork server listens on a socket file in it, and such a path
    # has at most 107 bytes); what the build leaves there is then moved to <site_dir>.tmp
    tmp = Path(tempfile.mkdtemp(prefix="build-"))
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    env.update(GRADFLOW_EXEC_CACHE="1", GRADFLOW_CACHE_DIR=f"{site_dir}.cache")
    env.update(GRADFLOW_WORKERS=str(workers), GRADFLOW_RUN_RECORDS=f"{site_dir}.runs")
    env.update(TMPDIR=str(tmp), GRADFLOW_BUILD=str(site_dir))
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)]
    cmd += ["--config-file", str(config)] if config else []
    try:
        return subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        )
    finally:
        Path(f"{site_dir}.tmp").parent.mkdir(parents=True, exist_ok=True)
        shutil.move(tmp, f"{site_dir}.tmp")


def child_config(tmp: Path, pages: dict[str, str], nav: list | None = None, extra: str = ""):
    """Write a config that inherits mkdocs.yml but builds `pages` (name -> Markdown) instead."""
    (tmp / "docs").mkdir(parents=True, exist_ok=True)
    for name, text in pages.items():
        (tmp / "docs" / name).write_text(text, encoding="utf-8")
    nav = "".join(f"  - {p}\n" for p in (list(pages) if nav is None else nav))
    (tmp / "mkdocs.yml").write_text(
        f"INHERIT: {ROOT / 'mkdocs.yml'}\ndocs_dir: {tmp / 'docs'}\nhooks: [{HOOKS}]\nwatch: []\n"
        f"theme:\n  name: material\n  custom_dir: {ROOT / 'overrides'}\n"
        f"extra_css: []\nextra_javascript: []\nextra:\n  polyfills: []\nnav:\n{nav}{extra}"
    )
    return tmp / "mkdocs.yml"


TINY = """site_name: t
strict: true
plugins:
  - markdown-exec:
      languages: []
hooks: [{hooks}]
markdown_extensions:
  - admonition
  - attr_list
  - pymdownx.details
  - pymdownx.snippets:
      base_path: [.]
      check_paths: true
  - pymdownx.superfences:
      custom_fences:
        - name: python
          class: python
          validator: !!python/name:markdown_exec.validator
          format: !!python/name:gradflow_site.extension.formatter
  - pymdownx.blocks.caption
  - gradflow_site.extension
"""


def tiny_build(tmp: Path, page: str | dict[str, str]) -> subprocess.CompletedProcess:
    """Build a site of one page (index.md) or of `page` (name -> Markdown) with the hooks, the
    guide's Markdown extension and markdown-exec, by the console script; return the process."""
    (tmp / "docs").mkdir(parents=True, exist_ok=True)
    for name, text in (page if isinstance(page, dict) else {"index.md": page}).items():
        (tmp / "docs" / name).write_text(text, encoding="utf-8")
    (tmp / "mkdocs.yml").write_text(TINY.format(hooks=HOOKS))
    env = dict(os.environ, GRADFLOW_EXEC_CACHE="0", NO_MKDOCS_2_WARNING="1")
    env.pop("PYTHONPATH", None)
    cmd = [str(Path(sys.executable).parent / "mkdocs"), "build", "--strict"]
    return subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=120)


def start_run(cache: Path) -> Path:
    """Give this run a temporary directory and a process tag; return the directory."""
    os.environ.setdefault("PYTEST_DEBUG_TEMPROOT", tempfile.gettempdir())  # pytest's own stay
    run = Path(tempfile.mkdtemp(prefix="gradflow-test-run-"))
    os.environ["TMPDIR"] = tempfile.tempdir = str(run)
    os.environ[TAG] = uuid.uuid4().hex
    # torch's compiler cache (made when an optimizer first steps) is kept, not temporary
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(cache / "torchinductor"))
    return run


def tagged_processes(tag: str, var: str = TAG) -> list[str]:
    """'pid command' of every live process but this one whose environment has var=tag."""
    found = []
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error):  # gone meanwhile, or not ours to read
            if p.pid != os.getpid() and p.environ().get(var) == tag and p.status() != "zombie":
                found.append(f"{p.pid} {' '.join(p.cmdline())[:200]}")
    return found


def finish_run(run: Path) -> list[str]:
    """Return what the run left behind (files, live processes; the latter looked for again for
    GRADFLOW_LEFTOVER_GRACE seconds, 3, as they may be exiting) and remove its directory."""
    deadline = time.monotonic() + float(os.environ.get("GRADFLOW_LEFTOVER_GRACE", "3"))
    while (left := tagged_processes(os.environ[TAG])) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [f"process {p}" for p in left] + [f"{run.name}/{n}" for n in sorted(os.listdir(run))]
    shutil.rmtree(run, ignore_errors=True)
    return left
