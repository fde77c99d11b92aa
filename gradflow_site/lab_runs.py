"""Execute the rendered labs beside the chapters, each in a process of its own.

The executed labs (labs/run/*.ipynb in the nav) run while the chapters build; mkdocs-jupyter
(with `execute: false`) renders the executed copy, and the build waits for a lab only when it
reaches that page. A cell that raises fails the build with the lab's name, the cell and its
traceback.

Every lab starts at once, at a lower CPU priority than the chapters. A lab runs in IPython's own
shell (the one a Jupyter kernel wraps), cell after cell, with `%matplotlib inline`: what a cell
prints, shows and returns become its outputs, in order, as a kernel reports them (the executed
copies are byte-identical to `nbconvert --execute`'s). The process is a fork of the build (`start`
is called before the build has a second thread): torch, matplotlib and the rest are already
imported there, so a lab costs its own cells and nothing else, not a kernel's start and its
imports. The lab reads matplotlib's settings afresh and its setup
cell writes and imports its own copy of the gradflow_ref modules it uses, as in a kernel. Where a
fork is not safe (another thread runs, or not Linux) the same code runs in a fresh interpreter:
`python -m gradflow_site.lab_runs NOTEBOOK OUT LOG`.

With the execution cache on, an executed notebook is kept under .cache/labs/ by a key of the
notebook's bytes (which embed every line of code it runs, gradflow_ref modules included) and
the package versions; with it off (tests, CI) every build executes afresh.
"""

from __future__ import annotations

import atexit
import gc
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

from gradflow_site import parallel

__all__ = ["LabRun", "cleanup", "execute", "start", "wait"]


@dataclass
class LabRun:
    uri: str  # the page's path in the site, e.g. labs/run/pipeline.ipynb
    src_dir: Path  # folder holding `uri` once executed (the File's src_dir)
    pid: int | None  # the process executing it; None once it has ended or came from the cache
    log: Path | None  # what went wrong, read when it fails
    produced: Path | None = None  # where the process writes the executed copy
    proc: subprocess.Popen | None = None  # the fresh interpreter, when it could not fork


_runs: dict[str, LabRun] = {}
_temp_dirs: list[Path] = []  # executed copies outside the cache: removed after the build


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
            run = _runs[uri] = LabRun(uri, src_dir, None, None)
            return run
    else:
        src_dir = Path(tempfile.mkdtemp(prefix="gradflow-lab-"))
        _temp_dirs.append(src_dir)
    target = src_dir / uri
    target.parent.mkdir(parents=True, exist_ok=True)
    produced = target.parent / f".{target.stem}.{os.getpid()}.tmp.ipynb"
    log = target.parent / f".{target.stem}.{os.getpid()}.log"
    run = _runs[uri] = LabRun(uri, src_dir, None, log, produced)
    if parallel.can_fork():
        parallel.preload()  # imported once here, not again in each lab
        run.pid = os.fork()
        if run.pid == 0:
            _child(notebook, produced, log)
        return run
    try:
        root = str(Path(__file__).resolve().parents[1])  # gradflow_site may not be installed
        path = os.pathsep.join([root] + [p for p in [os.environ.get("PYTHONPATH")] if p])
        run.proc = subprocess.Popen(
            [sys.executable, "-m", "gradflow_site.lab_runs", notebook, produced, log],
            cwd=target.parent,
            env=dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1"),
        )
    except OSError as err:  # wait() reports it
        log.write_text(f"could not start {sys.executable}: {err}\n", encoding="utf-8")
    return run


def _child(notebook: Path, produced: Path, log: Path) -> None:
    """In the fork: execute the lab and leave, running the lab's exit handlers, not the build's."""
    code = 1
    try:
        atexit._clear()  # the build's handlers (kill the labs, remove folders) are not ours
        # what the build holds (hundreds of thousands of objects, none of them garbage) is
        # frozen out of this process's garbage collections, which would otherwise walk it all
        # again in each fork
        gc.freeze()
        os.nice(10)  # the chapters first: the build waits for a lab only at its page, at the end
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(produced.parent)
        _fresh_matplotlib()
        code = execute(notebook, produced, log)
        atexit._run_exitfuncs()  # the lab's own, as when a kernel stops
    finally:
        os._exit(code)


def _fresh_matplotlib() -> None:
    """Give matplotlib the settings a new process in this folder would read.

    The build read the repository's matplotlibrc (the chapters' figures); a lab's kernel does not.
    """
    import matplotlib

    fresh = matplotlib.rc_params()  # matplotlibrc of the current folder, or the defaults
    matplotlib.rcParams.update({k: v for k, v in fresh.items() if k != "backend"})


def execute(notebook: Path, produced: Path, log: Path) -> int:
    """Run every code cell of `notebook` in an IPython shell; write the executed copy.

    Returns 0, or 1 after writing which cell failed and its traceback to `log`.
    """
    import io
    import logging

    import nbformat

    logging.disable(logging.CRITICAL)  # the build's log belongs to the build
    folder = Path(tempfile.mkdtemp(prefix="gradflow-ipython-"))
    os.environ.update(IPYTHONDIR=str(folder), MPLBACKEND="Agg", GRADFLOW_SITE_BUILD="1")
    try:
        nb = nbformat.read(notebook, as_version=4)
        shell, outputs = _shell()
        count = 0
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            count += 1
            outputs.clear()
            stdout, stderr = sys.stdout, sys.stderr
            sys.stdout, sys.stderr = _Stream("stdout", outputs), _Stream("stderr", outputs)
            try:
                result = shell.run_cell(cell.source, store_history=False)
            finally:
                sys.stdout, sys.stderr = stdout, stderr
            for output in outputs:
                if output.output_type == "execute_result":
                    output.execution_count = count
            cell.outputs, cell.execution_count = list(outputs), count
            error = result.error_before_exec or result.error_in_exec
            if error is not None:
                text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
                log.write_text(
                    f"cell {count} ({cell.get('id', '?')}) raised {type(error).__name__}: "
                    f"{error}\n{text[-2500:]}",
                    encoding="utf-8",
                )
                return 1
        nbformat.validate(nb)
        produced.write_text(nbformat.writes(nb), encoding="utf-8")
        return 0
    except Exception:  # noqa: BLE001  # the build reports it from the log
        buf = io.StringIO()
        traceback.print_exc(file=buf)
        log.write_text(buf.getvalue(), encoding="utf-8")
        return 1
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class _Stream:
    """sys.stdout or sys.stderr of a cell: consecutive writes join one stream output."""

    def __init__(self, name: str, outputs: list) -> None:
        self.name, self.outputs = name, outputs

    def write(self, text: str) -> int:
        import nbformat

        last = self.outputs[-1] if self.outputs else None
        if last is not None and last.output_type == "stream" and last.name == self.name:
            last.text += text
        elif text:
            self.outputs.append(nbformat.v4.new_output("stream", name=self.name, text=text))
        return len(text)

    encoding = "utf-8"

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False


def _shell():
    """Return (shell, outputs): an IPython shell whose displays and results go to `outputs`."""
    import nbformat
    from IPython.core.displayhook import DisplayHook
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets import Type
    from traitlets.config import Config

    outputs: list = []

    class Publisher(DisplayPublisher):  # display(), and each figure at the end of a cell
        def publish(self, data, metadata=None, *args, **kwargs):
            outputs.append(
                nbformat.v4.new_output("display_data", data=data, metadata=metadata or {})
            )

    class Result(DisplayHook):  # the value of a cell's last expression: its execute_result
        def write_output_prompt(self):
            pass

        def write_format_data(self, format_dict, md_dict=None):
            outputs.append(
                nbformat.v4.new_output(
                    "execute_result",
                    data=format_dict,
                    metadata=md_dict or {},
                    execution_count=None,  # execute() numbers the cells
                )
            )

    class Shell(InteractiveShell):
        displayhook_class = Type(Result)
        display_pub_class = Type(Publisher)

        def enable_gui(self, gui=None):  # `%matplotlib inline` needs no event loop
            pass

    config = Config()
    config.HistoryManager.enabled = False  # nothing written under the home folder
    config.InteractiveShell.colors = "nocolor"
    return Shell.instance(config=config), outputs


def wait(uri: str) -> LabRun:
    """Wait for the lab `uri` to finish; move its output into place and return its run.

    Raises:
        RuntimeError: a cell raised or the lab could not run; the message ends with its log.
    """
    run = _runs[uri]
    if run.produced is None:  # the executed copy came from the cache
        return run
    code = None
    if run.pid is not None:
        _, status = os.waitpid(run.pid, 0)
        code, run.pid = os.waitstatus_to_exitcode(status), None
    elif run.proc is not None:
        code = run.proc.wait()
    target = run.src_dir / uri
    if code != 0 or not run.produced.exists():
        tail = run.log.read_text("utf-8", errors="replace")[-3000:] if run.log.exists() else ""
        raise RuntimeError(f"executing {uri} failed (exit {code}):\n{tail}")
    run.produced.replace(target)
    run.log.unlink(missing_ok=True)
    run.produced = None
    return run


def _kill_all() -> None:
    for run in _runs.values():
        if run.pid is not None:
            try:
                os.kill(run.pid, signal.SIGKILL)
                os.waitpid(run.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            run.pid = None
        if run.proc is not None and run.proc.poll() is None:
            run.proc.kill()
            run.proc.wait()


atexit.register(_kill_all)


def cleanup() -> None:
    """Remove the temporary folders of this build's executed labs (hooks.on_post_build)."""
    while _temp_dirs:
        shutil.rmtree(_temp_dirs.pop(), ignore_errors=True)


atexit.register(cleanup)


if __name__ == "__main__":  # the fresh-interpreter path of `start`
    sys.exit(execute(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])))
