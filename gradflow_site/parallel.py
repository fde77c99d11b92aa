"""Render the chapters in two processes: the build and a fork of it, meeting in the middle.

Most of a clean build is the chapters' code blocks, run one page after the other. `start` forks
the build once its imports are done (when the build knows its files, before any thread
starts). The build takes the chapters from the first one forwards and the fork from the last
one backwards; a page goes to whichever process claims it first (an exclusive file per page),
so neither waits on a guess of how long a page takes. For each page it renders, the fork hands
over what every block printed, keyed as gradflow_site/exec_cache.py keys it (the block and the
blocks before it in its session); the build takes that output when it reaches the page
(`take`) and writes the HTML it would have computed itself. Every session starts from the
same seeds in either process.

The arena trains in-process through train.py, and torch keeps gloo's threads alive after
that; a rank forked from a process with those threads hangs, so gradflow_ref._ranks then starts
fresh processes instead, at seconds each. The build therefore renders LAST_PAGES (the arena)
after every other page (gradflow_site/hooks.py puts them last), and the fork, which starts with
them, leaves RANK_PAGES, whose blocks start ranks (the DDP and FSDP2 runs, the training script
on one process and on two), to the build, which renders them first, while the fork works.
SLOW_PAGES come just before LAST_PAGES, so that the fork takes them early and the two processes
meet on short pages: the one that reaches a page the other is rendering waits for it.

A block that raises in the fork is not handed over: the build runs it again and reports it as
always. If the fork dies, the build renders its pages. Only `mkdocs build` forks (`mkdocs serve`
has server threads, and its rebuilds take cached results anyway); GRADFLOW_PARALLEL=0 turns it
off.
"""

from __future__ import annotations

import atexit
import gc
import hashlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "LAST_PAGES",
    "RANK_PAGES",
    "SLOW_PAGES",
    "can_fork",
    "enabled",
    "finish",
    "preload",
    "start",
    "take",
]

RANK_PAGES = ("accumulation.md", "memory.md", "train.md")  # their blocks start ranks
LAST_PAGES = ("arena.md",)  # their blocks run train.py in-process
SLOW_PAGES = ("clipping.md", "loss_scaling.md")  # the slowest of the rest, in the fork's queue

_state: dict = {"pid": None, "dir": None}


def enabled() -> bool:
    """Return whether the build may fork (GRADFLOW_PARALLEL is not 0/off/false/no)."""
    return os.environ.get("GRADFLOW_PARALLEL", "1").lower() not in ("0", "off", "false", "no")


def can_fork() -> bool:
    """Return whether this process may fork: Linux, and no thread but this one.

    (macOS system libraries are not fork-safe; Windows has no fork; a fork of a process with
    other threads may inherit a lock one of them held.)
    """
    if not sys.platform.startswith("linux"):
        return False
    return len(os.listdir("/proc/self/task")) == 1


def preload() -> None:
    """Import, before a fork, what the chapters and labs import later, so each fork has it."""
    import matplotlib.pyplot  # noqa: F401
    import torch._dynamo  # noqa: F401  # what torch imports when a program builds an optimizer


def _name(uri: str) -> str:
    return hashlib.sha256(uri.encode()).hexdigest()[:16]


def _claim(uri: str) -> bool:
    """Claim the page `uri` for this process; return False when the other one has it."""
    try:
        os.close(os.open(_state["dir"] / f"{_name(uri)}.claim", os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


def start(pages: list[str], render: Callable[[str], object]) -> None:
    """Fork a process that renders `pages` (in build order) from the last one back.

    Args:
        pages: the pages' paths under docs/, as `take` is asked for them.
        render: renders one page through the build's own steps, so that its blocks run.

    Does nothing where the process cannot fork safely (`can_fork`): the build renders them all.
    """
    finish()
    if not can_fork():
        return
    preload()
    _state["dir"] = Path(tempfile.mkdtemp(prefix="gradflow-parallel-"))
    pid = os.fork()
    if pid == 0:  # the fork: render, hand over, and leave without running the build's exit code
        code = 1
        try:
            gc.freeze()  # see lab_runs._child
            _render_from_the_end(pages, render)
            code = 0
        finally:
            os._exit(code)
    _state["pid"] = pid


def _render_from_the_end(pages: list[str], render: Callable[[str], object]) -> None:
    from gradflow_site import exec_cache

    # quiet: the build reports every problem itself when it runs a block the fork could not
    logging.disable(logging.CRITICAL)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.dup2(null, 2)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    for uri in reversed(pages):
        if uri in RANK_PAGES:
            continue  # the build renders it (see the module's docstring)
        if not _claim(uri):
            return  # the build has come this far
        exec_cache.record()
        started = time.perf_counter()
        try:
            render(uri)
        except Exception:  # the build runs the block again and reports it
            pass
        handed = exec_cache.recorded()
        handed["seconds"] = time.perf_counter() - started
        out = _state["dir"] / f"{_name(uri)}.json"
        partial = out.with_suffix(".partial")
        partial.write_text(json.dumps(handed), encoding="utf-8")
        partial.replace(out)


def take(uri: str) -> dict | None:
    """Return what the fork handed over for the page `uri`, or None: the build renders it.

    Waits while the fork is rendering that page.
    """
    if _state["pid"] is None or _claim(uri):
        return None
    out = _state["dir"] / f"{_name(uri)}.json"
    while not out.exists():
        done, _ = os.waitpid(_state["pid"], os.WNOHANG)
        if done:  # the fork ended without finishing this page
            _state["pid"] = None
            return None if not out.exists() else json.loads(out.read_text(encoding="utf-8"))
        time.sleep(0.01)
    return json.loads(out.read_text(encoding="utf-8"))


def finish() -> None:
    """Stop the fork if it still runs and remove its folder (on_post_build, and at exit)."""
    pid, _state["pid"] = _state["pid"], None
    if pid is not None:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    folder, _state["dir"] = _state["dir"], None
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


atexit.register(finish)
