"""Run a reader's program as `python -I -W error PROGRAM` runs it, without paying for the
torch, numpy and matplotlib imports each time.

A server process (one per test worker) starts as that command would, in an empty folder,
imports `torch`, `numpy` and `matplotlib` (the top-level packages only: what every lab and
page imports first) and `torch._dynamo` (which torch imports when the first optimizer is built,
1.1 s of it; `torch._dynamo` is one of torch's lazy attributes, so a program sees it the same
either way), and then forks a child for each program. The child takes the program's
folder, environment, argv and standard streams and runs it as `__main__`, in a process group
of its own, with freshly seeded random generators; it exits as an interpreter exits (atexit
handlers, flushed streams). A program sees what a fresh interpreter that has imported torch,
numpy and matplotlib and built an optimizer sees (tests/test_forkrun.py compares the two):
nothing of the repository, of `gradflow_ref`, of pyplot or of any other module is loaded
before it runs. The server freezes its objects (`gc.freeze()`) before it forks: a child's
garbage collections then skip the server's 300,000 tracked objects, none of which is ever garbage,
instead of walking them, and copying every page they touch, on each full collection and at
exit (a lab's run 6.9 -> 2.6 s).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# what a reader's program starts from: the packages every lab and page imports first, and
# torch._dynamo (see the module docstring)
READER = "import torch, numpy, matplotlib\nimport torch._dynamo"
# what every `mkdocs build` of this repository imports: MkDocs, its plugins and extensions,
# and torch (the hooks import it; OMP_NUM_THREADS and friends are set first, as the hooks set
# them). Not matplotlib: it reads its settings (the repository's matplotlibrc) from the
# folder it is first imported in, which is the build's.
BUILD = (
    "import mkdocs.__main__, mkdocs.commands.build, markdown, pymdownx.superfences, "
    "pymdownx.snippets, pymdownx.details, markdown_exec, material.plugins.search.plugin, "
    "material.plugins.offline.plugin, mkdocs_jupyter.plugin, torch"
)

SERVER = r"""
import gc, json, os, runpy, sys, tempfile, traceback
PRELOAD
gc.freeze()

for line in sys.stdin:
    job = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        os.chdir(job["cwd"])
        os.environ.clear()
        os.environ.update(job["env"])
        tempfile.tempdir = None  # found again from TMPDIR, as a fresh interpreter finds it
        # new seeds, as a new interpreter draws them (`random` reseeds itself after a fork)
        if "torch" in sys.modules:
            sys.modules["torch"].seed()
        if "numpy.random" in sys.modules:  # torch._dynamo loads it
            sys.modules["numpy.random"].seed()
        for fd, name in ((0, os.devnull), (1, job["stdout"]), (2, job["stderr"])):
            flags = os.O_RDONLY if fd == 0 else os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            target = os.open(name, flags, 0o644)
            os.dup2(target, fd)
            os.close(target)
        sys.argv = job["argv"]
        if job["path0"] is not None:  # as `python -m` (the folder) or a script (its folder)
            extra = [p for p in job["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
            sys.path[:1] = [job["path0"], *extra]
        try:
            if job["module"]:
                runpy.run_module(job["module"], run_name="__main__", alter_sys=True)
            else:
                runpy.run_path(job["program"], run_name="__main__")
        except SystemExit:
            raise
        except BaseException:
            traceback.print_exc()
            sys.exit(1)
        sys.exit(0)
    print(pid, flush=True)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
"""


class ForkRunner:
    """A server that forks a fresh-looking Python for each program; close() ends it.

    `preload` is what the server imports before it forks (READER: a reader's program, run as
    `python -I -W error`; BUILD: `mkdocs build`, run as plain `python`, `isolated=False`).
    """

    def __init__(self, env: dict[str, str], preload: str = READER, isolated: bool = True):
        self._flags = ["-I", "-W", "error"] if isolated else []
        self._home = tempfile.TemporaryDirectory(prefix="gradflow-forkrun-")
        self._proc = subprocess.Popen(
            [sys.executable, *self._flags, "-c", SERVER.replace("PRELOAD", preload)],
            cwd=self._home.name,  # an empty folder: no matplotlibrc, no package to find
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def _line(self, timeout: float) -> str | None:
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout)
        return self._proc.stdout.readline().strip() if ready else None

    def run(
        self,
        program: str,
        cwd: Path,
        env: dict[str, str],
        timeout: float = 600,
        argv: list[str] | None = None,
        module: str | None = None,
        path0: str | None = None,
    ) -> subprocess.CompletedProcess:
        """Run `program` (a file in `cwd`) with `env`; return its exit code and output.

        With `module`, run that module as `python -m module` does (`program` only names it in
        messages). `argv` is sys.argv (default: [program]); `path0` becomes sys.path[0] (the
        folder `python -m` or a script puts first), followed by PYTHONPATH's entries.
        """
        home = Path(self._home.name)  # not the program's folder: it sees only its own files
        out, err = home / "stdout", home / "stderr"
        argv = argv or [program]
        job = {"program": program, "cwd": str(cwd), "env": env, "argv": argv}
        job.update(module=module, path0=path0, stdout=str(out), stderr=str(err))
        self._proc.stdin.write(json.dumps(job) + "\n")
        self._proc.stdin.flush()
        pid = self._line(60)
        if not pid:  # no answer in time, or the server has ended
            raise RuntimeError(
                f"the fork server did not start {program} (exit {self._proc.poll()})"
            )
        code = self._line(timeout)
        if code is None:
            os.killpg(int(pid), signal.SIGKILL)
            self._line(60)
            raise subprocess.TimeoutExpired(program, timeout)
        start = ["-m", module] if module else [program]
        result = subprocess.CompletedProcess(
            [sys.executable, *self._flags, *start, *argv[1:]],
            int(code),
            out.read_text(encoding="utf-8", errors="replace"),
            err.read_text(encoding="utf-8", errors="replace"),
        )
        out.unlink()
        err.unlink()
        return result

    def close(self) -> None:
        self._proc.stdin.close()
        self._proc.wait(timeout=60)
        self._proc.stdout.close()
        self._home.cleanup()


def reader_env(**extra: str) -> dict[str, str]:
    """The test run's environment without Python's and the build's own variables."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "GRADFLOW")) and k != "VIRTUAL_ENV"
    }
    env.update(MPLBACKEND="Agg", OMP_NUM_THREADS="1", **extra)
    return env
