"""What runs in a worker of the build's process pool (gradflow_site/run.py): a chapter's cells.

A worker loads torch, matplotlib and what most chapters use once (`init`), and forks for each
chapter (`run_page`), so every chapter starts from the same clean process and imports afresh
what it uses of the repository; an audit hook notes every file the chapter opened or gave to a
process it started. In the chapter's process each session starts from fixed seeds in a fresh
namespace; a block's output is what it prints (as markdown-exec captures it) and an inline value
is evaluated right after the last executed block above it.
"""

from __future__ import annotations

import gc
import hashlib
import os
import re
import sys
import time
from pathlib import Path

from gradflow_site.cells import Cell

__all__ = ["PRELOAD", "init", "run_page"]

# what the build's fork server loads before the workers fork from it (gradflow_site/run.py)
PRELOAD = ("torch", "torch.distributed.checkpoint", "torch.distributed.fsdp", "matplotlib.pyplot")

ROOT = Path(__file__).resolve().parents[1]
_OWN = ("gradflow_site.worker", "gradflow_site.cells")  # what runs the chapter: kept
_INSIDE = str(ROOT) + os.sep

_reads: set[str] = set()


def init() -> None:
    """Set a worker up: the checkout first on sys.path, torch and matplotlib warmed up."""
    os.environ["GRADFLOW_SITE_BUILD"] = "1"  # read by the labs' setup cell
    # torch's compiler cache (made when an optimizer first steps) under .cache/, not in TMPDIR
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(ROOT / ".cache" / "torchinductor"))
    os.chdir(ROOT)
    # this checkout's gradflow_ref whatever is installed; snippets/ last, as a reader who saved
    # train.py beside a page's code imports it
    sys.path[:] = [str(ROOT)] + [p for p in sys.path if p not in ("", str(ROOT))]
    sys.path.append(str(ROOT / "snippets"))
    torch = _warm_up()
    torch.set_num_threads(1)
    sys.addaudithook(_audit)
    # what the worker holds now is every chapter's starting point: out of the collector's walks,
    # which in a fork would copy every page they touch (the documented use of gc.freeze)
    gc.freeze()


def _warm_up():
    """Load once per worker what most chapters use, so that no chapter's fork pays for it.

    torch and its distributed packages, AdamW's first step (it loads torch's compiler stack) and
    matplotlib's first SVG figure (fonts, text layout): about a second a chapter otherwise.
    """
    import io

    import matplotlib.pyplot as plt
    import torch
    import torch.distributed.checkpoint
    import torch.distributed.fsdp  # noqa: F401

    model = torch.nn.Linear(2, 2)
    opt = torch.optim.AdamW(model.parameters())
    model(torch.ones(1, 2)).sum().backward()
    opt.step()
    fig, ax = plt.subplots()
    ax.plot([1, 10], label="x")
    ax.set_yscale("log")
    ax.legend()
    ax.set_title("$x^2$")
    fig.savefig(io.StringIO(), format="svg")
    plt.close(fig)
    return torch


def _audit(event: str, args: tuple) -> None:
    if event == "open" and isinstance(args[0], (str, Path)):
        _reads.add(str(args[0]))
    elif event == "subprocess.Popen" and isinstance(args[1], (list, tuple)):
        _reads.update(str(a) for a in args[1] if isinstance(a, (str, Path)))


def _repository_file(name: str) -> str | None:
    """Return `name` relative to the checkout if it is a file of the repository, else None."""
    if os.path.isabs(name) and not name.startswith(_INSIDE):  # most: torch's, the system's
        return None
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


def run_page(path: str, page: list[Cell], track: bool = True) -> dict:
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
            if file and _repository_file(file) and not name.startswith(_OWN):
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
