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

SERVER = r"""
import gc, json, os, runpy, sys, tempfile, traceback
import torch, numpy, matplotlib
import torch._dynamo
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
        torch.seed()
        if "numpy.random" in sys.modules:  # torch._dynamo loads it
            numpy.random.seed()
        for fd, name in ((0, os.devnull), (1, job["stdout"]), (2, job["stderr"])):
            flags = os.O_RDONLY if fd == 0 else os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            target = os.open(name, flags, 0o644)
            os.dup2(target, fd)
            os.close(target)
        sys.argv = [job["program"]]
        try:
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
    """A server that forks a fresh-looking Python for each program; close() ends it."""

    def __init__(self, env: dict[str, str]):
        self._home = tempfile.TemporaryDirectory(prefix="gradflow-forkrun-")
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-W", "error", "-c", SERVER],
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
        self, program: str, cwd: Path, env: dict[str, str], timeout: float = 600
    ) -> subprocess.CompletedProcess:
        """Run `program` (a file in `cwd`) with `env`; return its exit code and output."""
        home = Path(self._home.name)  # not the program's folder: it sees only its own files
        out, err = home / "stdout", home / "stderr"
        job = {"program": program, "cwd": str(cwd), "env": env}
        job.update(stdout=str(out), stderr=str(err))
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
        result = subprocess.CompletedProcess(
            [sys.executable, "-I", "-W", "error", program],
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
