"""gradflow_ref._ranks: ranks started as fresh processes, their results, errors and deadline."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import torch

from gradflow_ref import _ranks
from gradflow_ref._ranks import run_ranks


@pytest.fixture(params=["forked", "fresh"], autouse=True)
def start(request, monkeypatch):
    """Every test runs with forked ranks (CPU-only machines) and fresh processes (GPUs)."""
    if request.param == "forked" and not _ranks._fork_is_safe():
        pytest.skip("this machine cannot fork ranks safely (no fork, or an accelerator)")
    monkeypatch.setattr(_ranks, "_fork_is_safe", lambda: request.param == "forked")
    return request.param


def _report(rank, world_size, spec):
    return rank, world_size, spec, os.environ["MASTER_ADDR"], os.environ["RANK"]


def _hang(rank, world_size, spec):
    time.sleep(120)


def _fail(rank, world_size, spec):
    raise ValueError(f"rank {rank} fails on purpose")


def test_run_ranks_returns_each_ranks_result_in_rank_order():
    got = run_ranks("tests.test_ranks:_report", 3, {"a": 1}, 60, "test")
    assert got == [(r, 3, {"a": 1}, "127.0.0.1", str(r)) for r in range(3)]


def test_run_ranks_kills_ranks_after_timeout(monkeypatch):
    started = []  # every rank's process, started or still starting when the time runs out
    forked = _ranks._Forked
    for name in ("_Forked", "Popen"):
        owner = _ranks if name == "_Forked" else _ranks.subprocess
        cls = getattr(owner, name)
        monkeypatch.setattr(
            owner, name, lambda *a, cls=cls, **k: started.append(cls(*a, **k)) or started[-1]
        )
    begin = time.monotonic()
    with pytest.raises(RuntimeError, match=r"test: the ranks did not finish in timeout_s=5"):
        run_ranks("tests.test_ranks:_hang", 2, None, 5, "test")
    assert time.monotonic() - begin < 20
    assert len(started) == 2
    for proc in started:
        pid = proc.process.pid if isinstance(proc, forked) else proc.pid
        with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
            os.kill(pid, 0)


def test_run_ranks_reports_a_rank_error_and_leaves_no_file(monkeypatch, tmp_path):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"(?s)test: rank 0 failed:.*fails on purpose"):
        run_ranks("tests.test_ranks:_fail", 2, None, 60, "test")
    assert list(tmp_path.iterdir()) == []


def _fail_or_wait(rank, world_size, spec):
    if rank == 1:
        raise ValueError("rank 1 fails while rank 0 waits for it")
    time.sleep(120)  # as a rank blocked on a collective with a dead peer


def test_run_ranks_stops_at_the_first_failed_rank_without_waiting_for_the_deadline():
    begin = time.monotonic()
    with pytest.raises(RuntimeError, match=r"(?s)test: rank 1 failed:.*waits for it"):
        run_ranks("tests.test_ranks:_fail_or_wait", 2, None, 100, "test")
    assert time.monotonic() - begin < 30


def _layer_norm(rank, world_size, spec):
    x = torch.randn(4096, 256)
    return float(torch.nn.functional.layer_norm(x, (256,)).abs().sum())


def test_run_ranks_finishes_after_the_parent_used_its_thread_pool():
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.nn.functional.layer_norm(torch.randn(4096, 256), (256,))  # starts the OpenMP pool
        got = run_ranks("tests.test_ranks:_layer_norm", 2, None, 30, "test")
    finally:
        torch.set_num_threads(threads)
    assert len(got) == 2


def test_fork_is_refused_after_a_process_group_ran_here():
    # in a process of its own: the autouse fixture above replaces _fork_is_safe in this one
    code = (
        "import torch.distributed as dist; from gradflow_ref import _ranks\n"
        "before = _ranks._fork_is_safe()\n"
        "from torch.distributed.device_mesh import init_device_mesh\n"
        "dist.init_process_group('gloo', store=dist.HashStore(), rank=0, world_size=1)\n"
        "mesh = init_device_mesh('cpu', (1,))  # as train.py; it keeps gloo's threads alive\n"
        "dist.destroy_process_group()\n"
        "import time; deadline = time.monotonic() + 10  # gloo starts its threads asynchronously\n"
        "while _ranks._fork_is_safe() and time.monotonic() < deadline: time.sleep(0.05)\n"
        "print(before, _ranks._fork_is_safe())\n"
    )
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", PYTHONWARNINGS="error")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(sys.platform.startswith("linux")), "False"]
