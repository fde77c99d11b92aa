"""Run a reader's program as `python -I -W error PROGRAM` would, without paying for the torch,
numpy and matplotlib imports (about 5 CPU-s) on each of the thirty-odd programs of a run: a
server started as that command would, in an empty folder, imports them once and forks a child
per program, which takes the program's folder, environment and output files, reseeds torch and
numpy as a new interpreter would, and runs it as `__main__` in a process group of its own.
tests/test_forkrun.py holds what a forked program sees to what a new interpreter shows.
"""

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

# torch._dynamo: what torch imports for the first optimizer. gc.freeze(): a child's garbage
# collections skip the server's objects instead of copying their pages
SERVER = r"""
import gc, json, os, runpy, sys, tempfile
import torch, numpy, matplotlib, torch._dynamo
gc.freeze()
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        os.chdir(job["cwd"])
        os.environ.clear()
        os.environ.update(job["env"])
        tempfile.tempdir = None  # found again from TMPDIR
        torch.seed(), numpy.random.seed()  # `random` reseeds itself after a fork
        for fd, name in ((0, os.devnull), (1, job["stdout"]), (2, job["stderr"])):
            target = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC if fd else os.O_RDONLY)
            os.dup2(target, fd), os.close(target)
        sys.argv = [job["program"]]  # sys.path stays: -I puts no script folder on it
        runpy.run_path(job["program"], run_name="__main__")  # an exception ends the child
        sys.exit()
    print(pid, flush=True)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


class ForkRunner:
    """The server, started with `env` (one per test worker: conftest's `forkrun`)."""

    def __init__(self, env: dict[str, str]):
        self._home = tempfile.TemporaryDirectory(prefix="gradflow-forkrun-")  # nothing to find
        cmd, pipe = [sys.executable, "-I", "-W", "error", "-c", SERVER], subprocess.PIPE
        # unbuffered: select() then sees every line the server writes
        self._proc = subprocess.Popen(cmd, 0, cwd=self._home.name, env=env, stdin=pipe, stdout=pipe)

    def _line(self, timeout: float) -> str | None:
        ready, _, _ = select.select([self._proc.stdout], [], [], timeout)
        return self._proc.stdout.readline().decode().strip() if ready else None

    def run(self, program: str, cwd: Path, env: dict[str, str], timeout: float = 600):
        """Run `program` (a file in `cwd`) with `env`; return a CompletedProcess. Past `timeout`
        its process group is killed and TimeoutExpired raised."""
        out, err = (os.path.join(self._home.name, name) for name in ("stdout", "stderr"))
        job = {"program": program, "cwd": str(cwd), "env": env, "stdout": out, "stderr": err}
        self._proc.stdin.write(json.dumps(job).encode() + b"\n")
        pid = self._line(60)
        if not pid:
            raise RuntimeError(f"the fork server did not start {program} ({self._proc.poll()})")
        code = self._line(timeout)
        if code is None:
            os.killpg(int(pid), signal.SIGKILL)
            self._line(60)
            raise subprocess.TimeoutExpired(program, timeout)
        output = [Path(p).read_text(encoding="utf-8", errors="replace") for p in (out, err)]
        return subprocess.CompletedProcess([program], int(code), *output)

    def close(self) -> None:
        self._proc.stdin.close()
        self._proc.wait(timeout=60)
        self._proc.stdout.close()
        self._home.cleanup()


def reader_env(**extra: str) -> dict[str, str]:
    """The test run's environment without Python's and the build's own variables."""
    drop = ("PYTHON", "GRADFLOW", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(drop)}
    return env | {"MPLBACKEND": "Agg", "OMP_NUM_THREADS": "1"} | extra
