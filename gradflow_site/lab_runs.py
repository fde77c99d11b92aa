"""Execute the rendered labs in background processes while the chapters build.

The executed labs (labs/run/*.ipynb in the nav) used to run inside mkdocs-jupyter, one after the
other, after every chapter had been built. Here they run in a background process (`nbconvert
--execute`) while the chapters build, one lab at a time and at a lower CPU priority, so they use
the core the chapters leave (the chapters are the build's longest path; with both labs at once
beside them a clean build took 30.1 s on 2 cores, one at a time at nice 10 27.6 s).
mkdocs-jupyter (with `execute: false`) renders the executed copy. The build waits for a lab
only when it reaches that page; a cell that raises fails the build with the lab's name.

With the execution cache on, an executed notebook is kept under .cache/labs/ by a key of the
notebook's bytes (which embed every line of code it runs, gradflow_ref modules included) and
the package versions; with it off (tests, CI) every build executes afresh.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LabRun", "start", "wait"]


@dataclass
class LabRun:
    uri: str  # the page's path in the site, e.g. labs/run/arena.ipynb
    src_dir: Path  # folder holding `uri` once executed (the File's src_dir)
    proc: subprocess.Popen | None  # None when the executed copy came from the cache
    log: Path | None  # nbconvert's output, read when it fails
    cmd: list[str] = field(default_factory=list)  # nbconvert's command, run by the queue
    done: threading.Event = field(default_factory=threading.Event)  # set once it has ended


_runs: dict[str, LabRun] = {}


_queue: list[LabRun] = []  # labs waiting for the one running now
_lock = threading.Lock()
_stopping = False


def _kill_all() -> None:
    global _stopping
    with _lock:
        _stopping = True
        _queue.clear()
    for run in _runs.values():
        if run.proc is not None and run.proc.poll() is None:
            run.proc.kill()


def _nice() -> None:  # in the child, before nbconvert starts
    os.nice(10)


def _drain() -> None:
    """Run the queued labs one after the other (a daemon thread while there are any)."""
    while True:
        with _lock:
            if not _queue or _stopping:
                return
            run = _queue[0]
        try:
            _launch(run)
            run.proc.wait()
        except OSError as err:  # nbconvert could not start: wait() reports it from the log
            run.log.write_text(f"could not start {run.cmd[:3]}: {err}\n", encoding="utf-8")
        finally:
            with _lock:
                _queue.pop(0)
            run.done.set()


def _launch(run: LabRun) -> None:
    with _lock:
        if _stopping:
            raise OSError("the build is stopping")
        with run.log.open("wb") as out:
            run.proc = subprocess.Popen(
                run.cmd,
                cwd=(run.src_dir / run.uri).parent,
                env=dict(
                    os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg", GRADFLOW_SITE_BUILD="1"
                ),
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_nice if hasattr(os, "nice") else None,
            )


atexit.register(_kill_all)

_temp_dirs: list[Path] = []  # executed copies outside the cache: removed after the build


def cleanup() -> None:
    """Remove the temporary folders of this build's executed labs (hooks.on_post_build)."""
    import shutil

    while _temp_dirs:
        shutil.rmtree(_temp_dirs.pop(), ignore_errors=True)


atexit.register(cleanup)


def start(uri: str, notebook: Path, cache_root: Path | None, versions: str) -> LabRun:
    """Start executing `notebook` for the page `uri`, unless a cached copy exists; return it.

    Args:
        uri: the page path, labs/run/<name>.ipynb.
        notebook: the generated, unexecuted notebook.
        cache_root: folder for executed copies (.cache/labs), or None to execute afresh into a
            temporary folder.
        versions: package versions, part of the cache key.
    """
    text = notebook.read_bytes()
    key = hashlib.sha256(text + versions.encode()).hexdigest()[:16]
    if cache_root is not None:
        src_dir = cache_root / key
        if (src_dir / uri).exists():
            run = LabRun(uri, src_dir, None, None)
            _runs[uri] = run
            return run
    else:
        src_dir = Path(tempfile.mkdtemp(prefix="gradflow-lab-"))
        _temp_dirs.append(src_dir)
    target = src_dir / uri
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp_name = f".{target.stem}.{os.getpid()}.tmp"
    log = target.parent / f"{tmp_name}.log"
    cmd = [
        sys.executable,
        "-m",
        "nbconvert",
        "--to",
        "notebook",
        "--execute",
        "--ExecutePreprocessor.timeout=600",
        "--ExecutePreprocessor.kernel_name=python3",
        "--output-dir",
        str(target.parent),
        "--output",
        tmp_name,
        str(notebook),
    ]
    run = LabRun(uri, src_dir, None, log, cmd)
    _runs[uri] = run
    with _lock:
        _queue.append(run)
        first = len(_queue) == 1
    if first:
        threading.Thread(target=_drain, name="gradflow-labs", daemon=True).start()
    return run


def wait(uri: str) -> LabRun:
    """Wait for the lab `uri` to finish; move its output into place and return its run.

    Raises:
        RuntimeError: the notebook raised or nbconvert failed; the message ends with its log.
    """
    run = _runs[uri]
    if not run.cmd:  # the executed copy came from the cache
        return run
    if not run.done.wait(timeout=900):
        raise RuntimeError(f"executing {uri} did not finish within 15 minutes")
    code = run.proc.returncode if run.proc is not None else None
    target = run.src_dir / uri
    produced = target.parent / f".{target.stem}.{os.getpid()}.tmp.ipynb"
    if code != 0 or not produced.exists():
        tail = run.log.read_text(encoding="utf-8", errors="replace")[-3000:] if run.log else ""
        raise RuntimeError(f"executing {uri} failed (exit {code}):\n{tail}")
    produced.replace(target)
    if run.log is not None:
        run.log.unlink(missing_ok=True)
    run.proc, run.cmd = None, []
    return run
