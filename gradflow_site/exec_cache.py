"""A result cache for markdown-exec's Python blocks, and a clean start for every page session.

markdown-exec re-runs every block on every build and `mkdocs serve` rebuild. This module wraps
its Python runner so that a block's printed output is reused when nothing it could depend on has
changed. The key of a block is a hash of:

- every earlier block of the same session in this build, and the block itself (so a changed
  block invalidates everything after it on the page),
- the source of gradflow_ref and gradflow_site, and matplotlibrc (snippet text is already in
  the blocks, expanded by pymdownx.snippets before markdown-exec sees it),
- the versions of Python, torch, matplotlib, numpy and markdown-exec.

On a miss, the session is reset and its earlier blocks are re-run silently before the block
itself, so a partly cached page computes exactly what a clean build computes. Every session
starts from fixed random seeds whether or not the cache is on, so a page never depends on the
pages built before it. Set GRADFLOW_EXEC_CACHE=0 to turn the cache off (the tests and CI do).
"""

from __future__ import annotations

import hashlib
import os
import platform
import random
from importlib import metadata
from pathlib import Path

__all__ = [
    "enabled",
    "failed_sessions",
    "forked",
    "hand_over",
    "install",
    "newest_code",
    "record",
    "recorded",
    "shown_blocks",
    "start_build",
    "stats",
    "versions",
    "set_page",
    "slowest_blocks",
    "widget_stats",
]

_state: dict = {
    "root": None,
    "dir": None,
    "fingerprint": "",
    "sessions": {},
    "installed": False,
    "hits": 0,
    "misses": 0,
    "widget_blocks": 0,
    "widget_seconds": 0.0,
    "block_seconds": [],  # (seconds, session, first line) of every block run in this build
    "page": "",  # the page whose blocks run now (hooks.on_page_markdown sets it)
    "showing": False,  # the block being run has a `source` option: the reader sees it
    "shown": [],  # (session, code, output) of every shown block, in build order
    "failed": set(),  # sessions with a block that raised in this build
    "recording": None,  # {key: output} of the blocks run since record() (the parallel fork)
    "handed": {},  # {key: output} the fork handed over (gradflow_site/parallel.py)
    "forked": 0,  # blocks whose output came from the fork
}


def enabled() -> bool:
    """Return whether caching is on (GRADFLOW_EXEC_CACHE is not 0/off/false/no)."""
    return os.environ.get("GRADFLOW_EXEC_CACHE", "1").lower() not in ("0", "off", "false", "no")


_enabled = enabled


def versions() -> str:
    """Return a short hash of the versions that computed results depend on."""
    h = hashlib.sha256()
    for package in ("python", "torch", "matplotlib", "numpy", "markdown-exec", "mkdocs-jupyter"):
        version = platform.python_version() if package == "python" else metadata.version(package)
        h.update(f"{package}={version}\n".encode())
    return h.hexdigest()[:16]


def _fingerprint(root: Path) -> str:
    h = hashlib.sha256(versions().encode())
    files = [root / "matplotlibrc"]
    for folder in ("gradflow_ref", "gradflow_site"):
        files += sorted((root / folder).rglob("*.py"))
    for path in files:
        if path.exists():
            h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def newest_code(root: Path) -> float:
    """Return when the newest file that a page's blocks may run was changed (its mtime).

    mkdocs.yml and the Python of snippets/, gradflow_ref/ and gradflow_site/: a page built
    before that may show what older code computed.
    """
    watched = [root / "mkdocs.yml"]
    for folder in ("snippets", "gradflow_ref", "gradflow_site"):
        watched += (root / folder).rglob("*.py")
    return max(p.stat().st_mtime for p in watched if p.exists())


def _seed() -> None:
    import numpy
    import torch

    random.seed(0)
    numpy.random.seed(0)
    torch.manual_seed(0)


def start_build(root: Path) -> None:
    """Reset per-build state; call once before each build (on_pre_build)."""
    _state["root"] = root
    _state["dir"] = root / ".cache" / "exec"
    _state["fingerprint"] = _fingerprint(root) if _enabled() else ""
    _state["sessions"] = {}
    _state["hits"] = _state["misses"] = _state["widget_blocks"] = 0
    _state["widget_seconds"] = 0.0
    _state["block_seconds"] = []
    _state["shown"] = []
    _state["failed"] = set()
    _state["recording"] = None
    _state["handed"] = {}
    _state["forked"] = 0


def record() -> None:
    """Start recording the output of every block run from now on (see `recorded`)."""
    _state["recording"] = {}
    _state["block_seconds"] = []
    _state["widget_blocks"] = 0
    _state["widget_seconds"] = 0.0


def recorded() -> dict:
    """Return what ran since `record()`: {"outputs": {key: output}, "blocks": block times,
    "widgets": [blocks, seconds]}, for `hand_over` in another process."""
    return {
        "outputs": dict(_state["recording"] or {}),
        "blocks": list(_state["block_seconds"]),
        "widgets": [_state["widget_blocks"], _state["widget_seconds"]],
    }


def hand_over(handed: dict) -> None:
    """Use the outputs another process `recorded()` for the same blocks instead of running them.

    Only blocks that ran to the end are in it; a block that raised there runs here.
    """
    _state["handed"].update(handed["outputs"])
    _state["block_seconds"] += [tuple(b) for b in handed["blocks"]]
    _state["widget_blocks"] += handed["widgets"][0]
    _state["widget_seconds"] += handed["widgets"][1]


def forked() -> int:
    """Return how many blocks of this build took their output from the parallel fork."""
    return _state["forked"]


def shown_blocks() -> list[tuple[str | None, str, str]]:
    """Return (session, code, printed output) of every block shown with its source so far.

    tests/test_copy_run.py runs the shown code as a reader copies it and compares with these.
    """
    return list(_state["shown"])


def failed_sessions() -> set[str]:
    """Return the sessions in which a block raised during this build."""
    return set(_state["failed"])


def stats() -> tuple[int, int]:
    """Return (hits, misses) of the current build."""
    return _state["hits"], _state["misses"]


def widget_stats() -> tuple[int, float]:
    """Return (blocks, seconds) spent running blocks that print a widget in this build.

    Cached blocks cost nothing and are not counted; a clean build counts them all.
    """
    return _state["widget_blocks"], _state["widget_seconds"]


def set_page(name: str) -> None:
    """Name the page whose blocks run from now on (for slowest_blocks)."""
    _state["page"] = name


def slowest_blocks(n: int = 8) -> list[tuple[float, str, str]]:
    """Return the `n` slowest blocks run in this build: (seconds, session, first code line)."""
    return sorted(_state["block_seconds"], reverse=True)[:n]


def install() -> None:
    """Wrap markdown-exec's Python runner (idempotent)."""
    if _state["installed"]:
        return
    from markdown_exec._internal.formatters import python as mx

    original = mx._run_python
    original_format = mx.base_format

    def base_format(**kwargs):
        _state["showing"] = bool(kwargs.get("source"))
        try:
            return original_format(**kwargs)
        finally:
            _state["showing"] = False

    def run(code: str, returncode=None, session=None, id=None, **extra):  # noqa: A002
        from gradflow_site import errors

        if session is not None and session in _state["failed"]:
            return ""  # an earlier block of this session raised: its NameErrors would follow
        try:
            output = _run(code, returncode, session, id, **extra)
        except mx.ExecutionError as err:
            if session is not None:
                _state["failed"].add(session)
            raise mx.ExecutionError(errors.explain(code, err.__cause__, str(err))) from err
        if _state["showing"]:
            _state["shown"].append((session, code, output))
        return output

    def _run(code: str, returncode=None, session=None, id=None, **extra):  # noqa: A002
        if session is None:
            return _cached(lambda: original(code, returncode, session, id, **extra), [code])[1]
        entry = _state["sessions"].setdefault(session, {"codes": [], "live": 0})
        if not entry["codes"]:
            # first block of the session in this build: start from a clean, seeded state
            mx._sessions_globals[session].clear()
            _seed()
        history = entry["codes"] + [code]

        def compute() -> str:
            if entry["live"] < len(entry["codes"]):
                # earlier blocks came from the cache: rebuild the session's state first
                mx._sessions_globals[session].clear()
                _seed()
                for earlier in entry["codes"]:
                    original(earlier, None, session, None)
            return original(code, returncode, session, id, **extra)

        hit, output = _cached(compute, history)
        entry["codes"].append(code)
        if not hit:
            entry["live"] = len(entry["codes"])
        return output

    mx._run_python = run
    mx.base_format = base_format
    _state["installed"] = True


def _history_key(history: list[str]) -> str:
    h = hashlib.sha256()
    for code in history:
        h.update(b"\0block\0" + code.encode())
    return h.hexdigest()


def _cached(compute, history: list[str]) -> tuple[bool, str]:
    """Return (hit, output) for the block that ends `history`, computing it on a miss."""
    key = _history_key(history)
    if key in _state["handed"]:
        _state["forked"] += 1
        return True, _state["handed"].pop(key)
    hit, output = _stored(compute, history)
    if _state["recording"] is not None:
        _state["recording"][key] = output
    return hit, output


def _stored(compute, history: list[str]) -> tuple[bool, str]:
    """Return (hit, output) from the disk cache, computing and storing the output on a miss."""
    if "widget(" in history[-1]:
        compute = _timed(compute)
    compute = _clocked(compute, history[-1])
    if not _enabled() or _state["dir"] is None:
        _state["misses"] += 1
        return False, compute()
    h = hashlib.sha256(_state["fingerprint"].encode())
    for code in history:
        h.update(b"\0block\0" + code.encode())
    path = _state["dir"] / f"{h.hexdigest()}.out"
    if path.exists():
        _state["hits"] += 1
        return True, path.read_text(encoding="utf-8")
    _state["misses"] += 1
    output = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(output, encoding="utf-8")
    tmp.replace(path)
    return False, output


def _clocked(compute, code: str):
    """Wrap `compute` to record its run time with the block's first line (slowest_blocks)."""
    import time

    def run() -> str:
        start = time.perf_counter()
        try:
            return compute()
        finally:
            line = next((x for x in code.splitlines() if x.strip()), "")[:60]
            _state["block_seconds"].append((time.perf_counter() - start, _state["page"], line))

    return run


def _timed(compute):
    """Wrap `compute` to add its run time to the widget statistics."""
    import time

    def run() -> str:
        start = time.perf_counter()
        try:
            return compute()
        finally:
            _state["widget_blocks"] += 1
            _state["widget_seconds"] += time.perf_counter() - start

    return run
