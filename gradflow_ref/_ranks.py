"""Start ranks as separate processes, as torchrun does, and collect what each returns.

On Linux without an accelerator the ranks are forked, which skips importing torch again
(seconds per rank), unless this process has run a process group of its own, whose threads a
forked rank would wait on. Elsewhere they are fresh Python processes: torch refuses autograd in
a child forked after the parent ran backward on a GPU, and Windows has no fork. Either way they
import nothing of the caller's script, so they start alike from a script, a notebook or the site
build, and run the same `_rank_main`.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

__all__ = ["run_ranks"]

_PACKAGE_PARENT = str(Path(__file__).resolve().parents[1])  # where this gradflow_ref lives
MAX_RANKS = 64  # each rank is a process of its own with its own torch, on this one machine
MAX_TIMEOUT_S = 86400.0  # a day; the CPU runs here take seconds


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _loopback_interface() -> str | None:
    names = [name for _, name in socket.if_nameindex()]
    return next((n for n in ("lo", "lo0") if n in names), None)


def _fork_is_safe() -> bool:
    """True where a forked rank is sound: Linux, no torch.distributed threads, no accelerator.

    A fork copies only the calling thread. After a process has run a process group of its own
    (train.py on one process does), gloo's threads (gloo_tcp_loop, pt_gloo_runloop) outlive
    destroy_process_group, and a rank forked from it hangs when it destroys its own group. With
    an accelerator, torch refuses autograd in a child forked after the parent ran backward there.
    """
    if not sys.platform.startswith("linux"):
        return False
    tasks = Path("/proc/self/task")
    threads = [(task / "comm").read_text().strip() for task in tasks.iterdir()]
    if any(name.startswith(("gloo", "pt_")) for name in threads):
        return False
    import torch

    accelerator = getattr(torch, "accelerator", None)  # torch 2.6 and later
    if accelerator is not None:
        return not accelerator.is_available()
    return not torch.cuda.is_available()


class _Forked:
    """A forked rank with the wait/poll/kill/returncode of subprocess.Popen."""

    def __init__(self, folder: str, env: dict):
        self.process = multiprocessing.get_context("fork").Process(
            target=_forked_main, args=(folder, env), daemon=True
        )
        with warnings.catch_warnings():
            # Python 3.12+ warns that fork() in a multi-threaded process may deadlock the child;
            # the rank takes no lock of the parent's: a fresh process group and its own threads
            warnings.filterwarnings("ignore", message=r".*use of fork\(\) may lead to deadlocks")
            self.process.start()

    def wait(self, timeout=None):
        self.process.join(timeout)
        if self.process.exitcode is None:
            raise subprocess.TimeoutExpired("rank", timeout)
        return self.process.exitcode

    def poll(self):
        return self.process.exitcode

    def kill(self):
        self.process.kill()

    @property
    def returncode(self):
        return self.process.exitcode


def _forked_main(folder: str, env: dict) -> None:
    os.environ.clear()
    os.environ.update(env)  # what a fresh process would get
    try:
        _rank_main(folder)
    except BaseException:
        Path(folder, f"rank{env['RANK']}.err").write_text(traceback.format_exc())
        os._exit(1)


def run_ranks(target: str, world_size: int, spec, timeout_s: float, func: str) -> list:
    """Run `target(rank, world_size, spec)` in `world_size` processes; return their results.

    Args:
        target: "module:function", importable in a fresh Python (a gradflow_ref function).
        world_size: processes to start. They find each other through torchrun's environment
            variables (MASTER_ADDR=127.0.0.1, MASTER_PORT, RANK, WORLD_SIZE), so the target
            calls `torch.distributed.init_process_group(backend)` with nothing else.
        spec: any picklable value, handed to every rank.
        timeout_s: kill every rank still running after this many seconds.
        func: the public function's name, for the error messages.

    Returns:
        What each rank's target returned, in rank order.

    Raises:
        TypeError / ValueError: a bad argument, before any rank starts: `target` not an
            importable "module:function", `world_size` outside 1..MAX_RANKS, `spec` not
            picklable, `timeout_s` not in (0, MAX_TIMEOUT_S].
        RuntimeError: a rank failed (its traceback is in the message) or ran past `timeout_s`.
    """
    _check_ranks(target, world_size, spec, timeout_s, func)
    with tempfile.TemporaryDirectory(prefix="gradflow-ranks-") as tmp:
        folder = Path(tmp)
        (folder / "spec.pkl").write_bytes(pickle.dumps((target, spec)))
        path = os.pathsep.join(filter(None, [_PACKAGE_PARENT, os.environ.get("PYTHONPATH")]))
        base = dict(
            os.environ,
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(_free_port()),
            WORLD_SIZE=str(world_size),
            PYTHONPATH=path,
            OMP_NUM_THREADS="1",
        )
        code = "import sys; from gradflow_ref._ranks import _rank_main; _rank_main(sys.argv[1])"
        fork, ranks = _fork_is_safe(), []
        for rank in range(world_size):
            env = dict(base, RANK=str(rank))
            if fork:
                ranks.append(_Forked(tmp, env))
                continue
            with open(folder / f"rank{rank}.err", "wb") as err:
                ranks.append(
                    subprocess.Popen(
                        [sys.executable, "-c", code, tmp],
                        env=env,
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                    )
                )
        deadline = time.monotonic() + timeout_s
        try:
            # a rank that fails leaves the others waiting for it: stop at the first failure
            while any(proc.poll() is None for proc in ranks):
                if any(proc.poll() not in (None, 0) for proc in ranks):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"{func}: the ranks did not finish in timeout_s={timeout_s} seconds and "
                        "were killed; raise `timeout_s` on a loaded machine."
                    )
                time.sleep(0.01)
        finally:
            for proc in ranks:
                if proc.poll() is None:
                    proc.kill()
                proc.wait()
        failed = [r for r, proc in enumerate(ranks) if proc.returncode != 0]
        for rank in failed:
            err = folder / f"rank{rank}.err"
            error = err.read_text(errors="replace")[-4000:] if err.exists() else ""
            if error.strip() or rank == failed[-1]:  # the one that failed first has a traceback
                raise RuntimeError(f"{func}: rank {rank} failed:\n{error}")
        return [pickle.loads((folder / f"rank{r}.pkl").read_bytes()) for r in range(world_size)]


def _check_ranks(target, world_size, spec, timeout_s, func) -> None:
    from gradflow_ref import _checks

    where = "run_ranks"
    _checks.instance(where, "func", func, str, "Pass the public function's name.")
    _checks.instance(where, "target", target, str, 'Pass "module:function".')
    module, _, name = target.partition(":")
    try:
        found = callable(getattr(importlib.import_module(module), name, None))
    except ImportError:
        found = False
    if not (module and name and found):
        raise ValueError(
            f'{where}: `target` must name an importable function as "module:function", got '
            f'{target!r}; e.g. "gradflow_ref.accumulation:_ddp_rank".'
        )
    _checks.count(where, "world_size", world_size, high=MAX_RANKS, fix="Each rank is a process.")
    _checks.bounded(where, "timeout_s", timeout_s, 0, MAX_TIMEOUT_S, "E.g. 180.0.", strict=False)
    if timeout_s == 0:
        raise ValueError(f"{where}: `timeout_s` must be positive, got {timeout_s!r}; e.g. 180.0.")
    try:
        pickle.dumps(spec)
    except Exception as e:
        raise TypeError(
            f"{where}: `spec` must be picklable (it is sent to every rank), got "
            f"{type(spec).__name__}: {e}."
        ) from None


def _rank_main(folder: str) -> None:
    """One rank: run the target named in `folder`/spec.pkl and pickle what it returns."""
    if (loopback := _loopback_interface()) is not None:
        os.environ["GLOO_SOCKET_IFNAME"] = loopback  # gloo's data connections on loopback too
    import torch

    # one thread, as OMP_NUM_THREADS=1 gives a fresh process: a forked rank that used the
    # parent's OpenMP pool would wait on threads fork did not copy
    torch.set_num_threads(1)
    rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    target, spec = pickle.loads(Path(folder, "spec.pkl").read_bytes())
    module, name = target.split(":")
    result = getattr(importlib.import_module(module), name)(rank, world_size, spec)
    Path(folder, f"rank{rank}.pkl").write_bytes(pickle.dumps(result))
