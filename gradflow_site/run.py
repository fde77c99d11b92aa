"""Run each chapter's code once per build, in a pool of processes, cached by every file it read.

`start` hands chapters (their cells: gradflow_site/cells.py) to a
`concurrent.futures.ProcessPoolExecutor` whose workers run them (gradflow_site/worker.py); the
build's hook starts every chapter as the build begins, and `result` waits for one.

A result is cached in .cache/run/ (or GRADFLOW_CACHE_DIR) by the cells' key and stays valid
while every repository file the run read has the bytes it read: the modules it imported, the
files it opened (data, result records) and those it gave to a process it started.
GRADFLOW_EXEC_CACHE=0 turns the cache off; GRADFLOW_WORKERS sets the number of processes
(default: one per core); GRADFLOW_RUN_RECORDS=DIR writes each page's cells and outputs to
DIR/<page>.json (tests/test_copy_run.py reads them).
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gradflow_site import worker
from gradflow_site.cells import Cell, key

__all__ = ["result", "result_of", "start", "summary"]

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------- the build's side


@dataclass
class _Run:
    path: str
    future: Future | None = None
    done: dict | None = None  # the worker's result, once known
    cells: list[Cell] = field(default_factory=list)


_runs: dict[str, _Run] = {}  # key -> run
_paths: dict[str, str] = {}  # page path -> key of its latest cells
_pool: ProcessPoolExecutor | None = None
_hashes: dict[Path, tuple[tuple[int, int], str]] = {}


def _dir() -> Path:
    return Path(os.environ.get("GRADFLOW_CACHE_DIR") or ROOT / ".cache" / "run")


def _cache_on() -> bool:
    return os.environ.get("GRADFLOW_EXEC_CACHE", "1").lower() not in ("0", "off", "false", "no")


def _sha(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return ""
    stamp = (stat.st_mtime_ns, stat.st_size)
    if path not in _hashes or _hashes[path][0] != stamp:
        _hashes[path] = (stamp, hashlib.sha256(path.read_bytes()).hexdigest())
    return _hashes[path][1]


def _fresh(done: dict) -> bool:
    """Return whether every file a finished run read still has the bytes it read."""
    return all(_sha(ROOT / rel) == sha for rel, sha in done["reads"].items())


def _executor() -> ProcessPoolExecutor:
    global _pool
    if _pool is None:
        import multiprocessing

        workers = int(os.environ.get("GRADFLOW_WORKERS", "0") or 0) or os.cpu_count() or 1
        # one thread per numerical library, before torch loads: the printed numbers do not
        # depend on the machine's cores, and a worker has no thread a fork could trip on
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, "1")
        os.environ.setdefault("MPLBACKEND", "Agg")
        os.environ.setdefault("MATPLOTLIBRC", str(ROOT / "matplotlibrc"))  # wherever mkdocs runs
        if "forkserver" in multiprocessing.get_all_start_methods():
            # the workers fork from one process that has loaded torch and matplotlib once
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload(list(worker.PRELOAD))
        else:
            context = multiprocessing.get_context("spawn")
        _pool = ProcessPoolExecutor(workers, mp_context=context, initializer=worker.init)
    return _pool


def start(pages: dict[str, list[Cell]]) -> list[str]:
    """Start the run of every page not running and without a fresh result, slowest first.

    Returns the pages' paths in the order their results should come: those known first, then
    as they were handed to the pool.
    """
    todo, ready = [], []
    for path, page in pages.items():
        k = _paths[path] = key(page)
        run = _runs.get(k)
        if run is not None and (run.done is None or _fresh(run.done)):
            (ready if run.done else todo).append((path, k, page))
            continue
        cached = _load(k) if _cache_on() else None
        if cached is not None:
            _runs[k] = _Run(path, done=cached, cells=page)
        elif any(c.kind == "block" for c in page):
            todo.append((path, k, page))
            continue
        elif page:  # inline values alone: nothing worth a process
            _runs[k] = _Run(path, done=worker.run_page(path, page, track=False), cells=page)
        ready.append((path, k, page))
    seconds = _load_json(_dir() / "seconds.json")
    todo.sort(key=lambda t: -seconds.get(t[0], 1e9))  # an unknown page may be slow: first
    for path, k, page in todo:
        if k not in _runs:
            _runs[k] = _Run(path, _executor().submit(worker.run_page, path, page), cells=page)
    return [path for path, _, _ in ready + todo]


def result(page: list[Cell], path: str = "") -> tuple[str, dict]:
    """Return (the page's path, its run: {"outputs": [...], "reads": {...}, "seconds": s})."""
    k = key(page)
    if k not in _runs or (_runs[k].done is not None and not _fresh(_runs[k].done)):
        start({path or "docs/(page)": page})
    run = _runs[k]
    if run.done is None:
        run.done = run.future.result()
        _finished(run)
    return run.path, run.done


def result_of(path: str) -> dict:
    """Return the finished run of the page at `path` as started, with its cells."""
    run = _runs[_paths[path]]
    return {"cells": [asdict(c) for c in run.cells], **result(run.cells, path)[1]}


def summary() -> str:
    """Return one line on this process's runs: how many ran, how many came from the cache."""
    done = [r for r in _runs.values() if r.done is not None]
    ran = sorted((r for r in done if r.future is not None), key=lambda r: -r.done["seconds"])
    slowest = ", ".join(f"{Path(r.path).name} {r.done['seconds']:.1f} s" for r in ran[:6])
    return (
        f"chapter runs: {len(ran)} ran ({sum(r.done['seconds'] for r in ran):.1f} s), "
        f"{len(done) - len(ran)} cached or without code; slowest: {slowest or 'none'}"
    )


def _finished(run: _Run) -> None:
    durations = _load_json(_dir() / "seconds.json")
    durations[run.path] = run.done["seconds"]
    _write(_dir() / "seconds.json", durations)
    if _cache_on() and not run.done["failed"]:
        _write(_dir() / f"{key(run.cells)}.json", run.done)
    records = os.environ.get("GRADFLOW_RUN_RECORDS")
    if records:
        page = {"path": run.path, "cells": [asdict(c) for c in run.cells], **run.done}
        _write(Path(records) / f"{Path(run.path).stem}.json", page)


def _load_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _load(k: str) -> dict | None:
    done = _load_json(_dir() / f"{k}.json")
    return done if done and _fresh(done) else None


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True, indent=0), encoding="utf-8")
    tmp.replace(path)
