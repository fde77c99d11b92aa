"""Run each chapter's code once per build, in a pool of processes, cached by every file it read.

A chapter's *cells* are its executed blocks (```` ```python exec="1" ````, snippet includes
expanded) and its inline values (`` `{python} expr` `` in the prose), in page order (`cells`).
`start` hands chapters to a `concurrent.futures.ProcessPoolExecutor` (the build's hook starts
every chapter when the build begins); `result` waits for one. In the worker, each session of a
page starts from fixed seeds in a fresh namespace; a block's output is what it prints (as
markdown-exec captures it), and an inline value is evaluated right after the last executed
block above it, so it shows the value the page has at that point.

A result is cached under .cache/run/ by a key of the cells, the versions and matplotlibrc, and
stays valid while every repository file the run read has the same bytes: the modules it imported
(the worker forgets the repository's modules before each chapter, so it imports what it uses
afresh), the files it opened (data, result records) and the repository files given to a process
it started. GRADFLOW_EXEC_CACHE=0 turns the disk cache off (the tests and CI); GRADFLOW_WORKERS
sets the number of processes (default: one per core); GRADFLOW_RUN_RECORDS=DIR writes each
page's cells and outputs to DIR/<page>.json (tests/test_copy_run.py reads them).
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
from importlib import metadata
from pathlib import Path

__all__ = [
    "Cell",
    "cells",
    "fences",
    "key",
    "normal",
    "page_cells",
    "result",
    "result_of",
    "start",
    "summary",
    "values",
]

ROOT = Path(__file__).resolve().parents[1]
INLINE = re.compile(r"(?<!`)`\{python\}[ \t]+([^`\n]+?)[ \t]*`(?!`)")
_QUOTED = re.compile(r"(`{2,}).+?\1")  # a code span of two or more backticks shows the syntax
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*)$")
_EXEC = re.compile(r"""\bexec\s*=\s*["']?(?:1|true|yes|on)\b""", re.I)
_OPTION = re.compile(r"""\b(session|source)\s*=\s*["']([^"']*)["']""")
_INCLUDE = re.compile(r'^\s*--8<--\s+"(?P<file>[^":]+)(?::(?P<section>[\w\-]+))?"\s*$')
_FRONT_MATTER = re.compile(r"\A---[ \t]*\n.*?\n(?:---|\.\.\.)[ \t]*\n", re.S)


@dataclass
class Cell:
    kind: str  # "block" (an executed fence) or "value" (an inline expression)
    code: str  # the block's code (dedented, includes expanded) or the value's expression
    session: str  # the block's session, or the one a value is evaluated in
    where: list[str]  # "file:line" of each line of `code`, for messages
    shown: bool = False  # a block whose code the reader sees (`source="..."`)


def fences(lines: list[str]):
    """Yield (first, last, indent, info) of every fenced block of `lines`, in order."""
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        char, size, first = m.group("fence")[0], len(m.group("fence")), i
        close = re.compile(rf"^[ \t]*{re.escape(char)}{{{size},}}[ \t]*$")
        i += 1
        while i < len(lines) and not close.match(lines[i]):
            i += 1
        yield first, min(i, len(lines) - 1), m.group("indent"), m.group("info")
        i += 1


def values(text: str) -> list[re.Match]:
    """Return the inline values of a line of prose, not those quoted in a ``code span``."""
    quoted = [m.span() for m in _QUOTED.finditer(text)]
    return [m for m in INLINE.finditer(text) if not any(a <= m.start() < b for a, b in quoted)]


def normal(code: str) -> str:
    """Return `code` as blocks are compared: trailing blanks and blank edge lines dropped."""
    return "\n".join(line.rstrip() for line in code.strip("\n").split("\n"))


def cells(lines: list[str], where: list[str] | None = None) -> list[Cell]:
    """Return the cells of a page's Markdown `lines`, snippet includes already expanded.

    Args:
        lines: the page's Markdown as the Markdown preprocessors hand it over.
        where: "file:line" of each of `lines` (default: "line N").
    """
    where = where or [f"line {n}" for n in range(1, len(lines) + 1)]
    inside: set[int] = set()
    blocks: list[tuple[int, Cell]] = []  # (last line index, cell)
    for first, last, indent, info in fences(lines):
        inside.update(range(first, last + 1))
        if not info.startswith(("python", "py ")) or not _EXEC.search(info):
            continue
        opts = dict(_OPTION.findall(info))
        body = [
            t[len(indent) :] if t.startswith(indent) else t.lstrip()
            for t in lines[first + 1 : last]
        ]
        # blank edge lines dropped from the code are dropped from its origins too
        lead = next((n for n, t in enumerate(body) if t.strip()), 0)
        cell = Cell("block", normal("\n".join(body)), opts.get("session", ""), [], "source" in opts)
        cell.where = [where[first]] + where[first + 1 + lead : last]
        blocks.append((last, cell))
    default = next((b.session for _, b in blocks if b.session), "")
    after: dict[int, list[Cell]] = {}  # index of the block above (-1: none) -> its values
    for n, text in enumerate(lines):
        if n in inside or "{python}" not in text:
            continue
        above = [i for i, (last, _) in enumerate(blocks) if last < n]
        session = (blocks[above[-1]][1].session if above else "") or default
        for m in values(text):
            cell = Cell("value", m.group(1), session, [where[n]])
            after.setdefault(above[-1] if above else -1, []).append(cell)
    out = list(after.get(-1, []))
    for i, (_, block) in enumerate(blocks):
        out.append(block)
        out += after.get(i, [])
    return out


def page_cells(text: str, path: str, expand) -> list[Cell]:
    """Return the cells of the Markdown file `text` (named `path`), with each line's origin.

    `expand(lines)` expands snippet includes as the build does (pymdownx.snippets); each
    expanded line is traced to its snippet file and line.
    """
    m = _FRONT_MATTER.match(text)
    offset = text[: m.end()].count("\n") if m else 0
    lines, where = [], []
    for n, line in enumerate(text[m.end() if m else 0 :].split("\n"), offset + 1):
        inc = _INCLUDE.match(line)
        if inc is None:
            lines.append(line)
            where.append(f"{path}:{n}")
            continue
        try:
            got = expand([line])
        except Exception as err:  # pymdownx.snippets' SnippetMissingError names no page
            what = ":".join(filter(None, inc.group("file", "section")))
            raise ValueError(f"{path}:{n}: includes {what}: {err}") from None
        origin = _section_lines(inc.group("file"), inc.group("section"))
        if len(origin) != len(got):
            origin = [f"{path}:{n}"] * len(got)
        lines += got
        where += origin
    return cells(lines, where)


def _section_lines(file: str, name: str | None) -> list[str]:
    """Return "file:line" of every line a snippet include stands for."""
    try:
        text = (ROOT / file).read_text(encoding="utf-8").split("\n")
    except OSError:
        return []
    out, inside = [], name is None
    for n, line in enumerate(text, 1):
        marker = re.match(r"^\s*# --8<-- \[(start|end):([\w\-]+)\]", line)
        if marker and marker.group(2) == name:
            if marker.group(1) == "end":
                break
            inside = True
        elif inside and not marker:
            out.append(f"{file}:{n}")
    return out


def versions() -> str:
    """Return the versions a page's results depend on, as one line."""
    import platform

    names = ("torch", "matplotlib", "numpy", "markdown-exec")
    found = [f"{n}={metadata.version(n)}" for n in names]
    return " ".join([f"python={platform.python_version()}", *found])


def key(page: list[Cell]) -> str:
    """Return the cache key of a page's cells: their code, the versions and matplotlibrc."""
    h = hashlib.sha256(versions().encode())
    rc = ROOT / "matplotlibrc"
    h.update(rc.read_bytes() if rc.exists() else b"")
    for c in page:
        h.update(json.dumps([c.kind, c.session, c.code]).encode() + b"\0")
    return h.hexdigest()


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
    seconds = _load_json(ROOT / ".cache" / "run" / "seconds.json")
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
    durations = _load_json(ROOT / ".cache" / "run" / "seconds.json")
    durations[run.path] = run.done["seconds"]
    _write(ROOT / ".cache" / "run" / "seconds.json", durations)
    if _cache_on() and not run.done["failed"]:
        _write(ROOT / ".cache" / "run" / f"{key(run.cells)}.json", run.done)
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
    done = _load_json(ROOT / ".cache" / "run" / f"{k}.json")
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
    """Run a page's cells in order; return each one's output and the files the run read."""
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
        except Exception as err:  # noqa: BLE001 - reported by the build, naming the line
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
