"""Run each chapter's code once per build, in a pool of processes, cached by every file it read.

`start` hands chapters (their cells: gradflow_site/cells.py) to a
`concurrent.futures.ProcessPoolExecutor`; the build's hook starts every chapter as the build
begins. `result` waits for one. In a worker, each session of a page starts from fixed seeds in a
fresh namespace; a block's output is what it prints (as markdown-exec captures it), and an
inline value is evaluated right after the last executed block above it, so it shows the value
the page has at that point.

A result is cached in .cache/run/ (or GRADFLOW_CACHE_DIR) by the cells' key and stays valid
while every repository file the run read has the bytes it read: the modules it imported (the
worker forgets the repository's modules before each chapter, so it imports afresh what it
uses), the files it opened (data, result records) and those given to a process it started.
GRADFLOW_EXEC_CACHE=0 turns the cache off; GRADFLOW_WORKERS sets the number of processes
(default: one per core); GRADFLOW_RUN_RECORDS=DIR writes each page's cells and outputs to
DIR/<page>.json (tests/test_copy_run.py reads them).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

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
        context = multiprocessing.get_context("spawn")
        _pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker)
    return _pool


def start(pages: dict[str, list[Cell]]) -> None:
    """Start the run of every page not running and without a fresh result; slowest first."""
    todo = []
    for path, page in pages.items():
        k = _paths[path] = key(page)
        run = _runs.get(k)
        if run is not None and (run.done is None or _fresh(run.done)):
            continue
        cached = _load(k) if _cache_on() else None
        if cached is not None:
            _runs[k] = _Run(path, done=cached, cells=page)
        elif any(c.kind == "block" for c in page):
            todo.append((path, k, page))
        elif page:  # inline values alone: nothing worth a process
            _runs[k] = _Run(path, done=_worker_run(path, page, track=False), cells=page)
    seconds = _load_json(_dir() / "seconds.json")
    todo.sort(key=lambda t: -seconds.get(t[0], 1e9))  # an unknown page may be slow: first
    for path, k, page in todo:
        _runs[k] = _Run(path, _executor().submit(_worker_run, path, page), cells=page)


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


# ---------------------------------------------------------------------- the worker's side

_reads: set[str] = set()


def _init_worker() -> None:
    """Set a worker up: one thread per library, the checkout first on sys.path, torch loaded."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.environ["GRADFLOW_SITE_BUILD"] = "1"  # read by the labs' setup cell
    # torch's compiler cache (made when an optimizer first steps) under .cache/, not in TMPDIR
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(ROOT / ".cache" / "torchinductor"))
    os.chdir(ROOT)
    # this checkout's gradflow_ref whatever is installed; snippets/ last, as a reader who saved
    # train.py beside a page's code imports it
    sys.path[:] = [str(ROOT)] + [p for p in sys.path if p not in ("", str(ROOT))]
    sys.path.append(str(ROOT / "snippets"))
    import matplotlib.pyplot  # noqa: F401 - once per worker, not once per chapter
    import torch

    torch.set_num_threads(1)
    sys.addaudithook(_audit)


def _audit(event: str, args: tuple) -> None:
    if event == "open" and isinstance(args[0], (str, Path)):
        _reads.add(str(args[0]))
    elif event == "subprocess.Popen" and isinstance(args[1], (list, tuple)):
        _reads.update(str(a) for a in args[1] if isinstance(a, (str, Path)))


def _repository_file(name: str) -> str | None:
    """Return `name` relative to the checkout if it is a file of the repository, else None."""
    try:
        path = Path(name).resolve()
        rel = path.relative_to(ROOT)
    except (OSError, ValueError):
        return None
    if rel.parts[0] in (".cache", ".git", ".venv", "build", "site") or not path.is_file():
        return None
    return rel.as_posix()


def _seed() -> None:
    import random

    import numpy
    import torch

    random.seed(0)
    numpy.random.seed(0)
    torch.manual_seed(0)


def _printer(buffer: list[str]):
    def print(*texts, end="\n", **kwargs) -> None:  # noqa: A001 - as markdown-exec captures it
        buffer.append(" ".join(str(t) for t in texts) + end)

    return print


def _worker_run(path: str, page: list[Cell], track: bool = True) -> dict:
    """Run a page's cells in order; return each one's output and the files the run read.

    On Linux the page runs in a fork of this worker, which has imported torch and matplotlib
    and nothing of the repository: each chapter starts from the same clean process (no module,
    global setting or thread another chapter left behind: a chapter that ran a process group
    would leave gloo's threads, and every rank forked after them would have to start a fresh
    interpreter), and imports afresh what it uses, which names its reads.
    """
    if not (track and sys.platform.startswith("linux")):
        return _run_page(path, page, track)
    import pickle

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the chapter's process: it never returns into the worker's loop
        try:
            os.close(read)
            with os.fdopen(write, "wb") as out:
                pickle.dump(_run_page(path, page, track), out)
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as got:
        data = got.read()
    _, status = os.waitpid(pid, 0)
    if not data:
        why = f"{page[0].where[0]}: the chapter's process died (wait status {status})"
        return {"outputs": [{"error": why}] + [{"skipped": True}] * (len(page) - 1),
                "reads": {}, "seconds": 0.0, "failed": True}  # fmt: skip
    return pickle.loads(data)


def _run_page(path: str, page: list[Cell], track: bool) -> dict:
    import linecache
    import types

    begin = time.perf_counter()
    if track:
        for name, module in list(sys.modules.items()):
            file = getattr(module, "__file__", None)
            if file and _repository_file(file) and not name.startswith("gradflow_site.run"):
                del sys.modules[name]  # imported afresh, so the run's reads name it
        _reads.clear()
    sessions: dict[str, dict] = {}
    failed: set[str] = set()
    outputs: list[dict] = []
    for n, cell in enumerate(page):
        if cell.session in failed:
            outputs.append({"skipped": True})
            continue
        if cell.session not in sessions:
            name = "gradflow_page_" + re.sub(r"[^A-Za-z0-9]+", "_", cell.session or str(n))
            sys.modules[name] = types.ModuleType(name)  # dataclasses look their module up
            sessions[cell.session] = {"__name__": name}
            _seed()
        ns = sessions[cell.session] if cell.session else {"__name__": "gradflow_page"}
        if cell.kind == "value":
            try:
                value = eval(cell.code, ns)  # noqa: S307 - the page's own code, at build time
                outputs.append({"value": value if isinstance(value, str) else str(value)})
            except Exception as err:  # noqa: BLE001 - reported with the page and line
                outputs.append(
                    {
                        "error": f"{cell.where[0]}: inline value `{{python}} "
                        f"{cell.code}` raised {type(err).__name__}: {err}"
                    }
                )
            continue
        buffer: list[str] = []
        ns["print"] = _printer(buffer)
        label = f"<{cell.where[0]}>"
        linecache.cache[label] = (len(cell.code), None, cell.code.splitlines(True), label)
        try:
            exec(compile(cell.code, label, "exec"), ns)  # noqa: S102 - the page's own code
            outputs.append({"output": "".join(buffer)})
        except (Exception, SystemExit) as err:  # noqa: BLE001 - reported, naming the line
            failed.add(cell.session)
            outputs.append({"error": _explain(cell, label, err), "output": "".join(buffer)})
    reads = {}
    if track:
        names = sorted(_reads) + [
            getattr(m, "__file__", None) or "" for m in list(sys.modules.values())
        ]
        for rel in filter(None, map(_repository_file, filter(None, names))):
            reads.setdefault(rel, hashlib.sha256((ROOT / rel).read_bytes()).hexdigest())
    return {
        "outputs": outputs,
        "reads": dict(sorted(reads.items())),
        "seconds": round(time.perf_counter() - begin, 3),
        "failed": bool(failed),
    }


def _explain(cell: Cell, label: str, err: BaseException) -> str:
    """Return one message for a block that raised: where, what, and the line that raised."""
    import traceback

    lineno = err.lineno if isinstance(err, SyntaxError) and err.filename == label else None
    for frame in traceback.extract_tb(err.__traceback__):
        if frame.filename == label:
            lineno = frame.lineno
    where, detail = cell.where[0], ""
    code = cell.code.split("\n")
    if lineno and 0 < lineno <= len(code):
        origin = cell.where[lineno] if lineno < len(cell.where) else cell.where[0]
        where = origin if origin.startswith("docs/") else f"{cell.where[0]} ({origin})"
        detail = f"\n    {code[lineno - 1].strip()}"
    return (
        f"{where}: the executed block raised {type(err).__name__}: {err}{detail}\n"
        "(later blocks of this page's session were not run)"
    )
