"""gradflow_ref._ranks: ranks started as fresh processes, their results, errors and deadline."""

from __future__ import annotations

import os
import time
from pathlib import Path

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


def _hang(rank, world_size, folder):
    Path(folder, f"{rank}.pid").write_text(str(os.getpid()))
    time.sleep(120)


def _fail(rank, world_size, spec):
    raise ValueError(f"rank {rank} fails on purpose")


def test_run_ranks_returns_each_ranks_result_in_rank_order():
    got = run_ranks("tests.test_ranks:_report", 3, {"a": 1}, 60, "test")
    assert got == [(r, 3, {"a": 1}, "127.0.0.1", str(r)) for r in range(3)]


def test_run_ranks_kills_ranks_after_timeout(start, tmp_path):
    # a fresh rank imports torch before it writes its pid: seconds on a loaded machine
    timeout_s = 5 if start == "forked" else 30
    begin = time.monotonic()
    with pytest.raises(RuntimeError, match=rf"test: the ranks did not finish in timeout_s={timeout_s}"):
        run_ranks("tests.test_ranks:_hang", 2, str(tmp_path), timeout_s, "test")
    assert time.monotonic() - begin < timeout_s + 15
    pids = [int(p.read_text()) for p in tmp_path.glob("*.pid")]
    assert len(pids) == 2, "the ranks did not start in time; the test proves nothing"
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_run_ranks_reports_a_rank_error_and_leaves_no_file(monkeypatch, tmp_path):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(RuntimeError, match=r"(?s)test: rank 0 failed:.*fails on purpose"):
        run_ranks("tests.test_ranks:_fail", 2, None, 60, "test")
    assert list(tmp_path.iterdir()) == []


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
