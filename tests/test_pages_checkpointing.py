"""Builders of docs/checkpointing.md (gradflow_site/pages/checkpointing.py)."""

from __future__ import annotations

import json
from functools import partial

import pytest
import torch
from torch.utils.checkpoint import checkpoint_sequential as torch_checkpoint_sequential

from gradflow_ref.checkpointing import measure, mlp
from gradflow_site.pages import checkpointing as page


@pytest.fixture(scope="module")
def data():
    return page.explorer(max_layers=6, start=(6, 2))


def test_explorer_stores_every_layer_and_segment_count(data):
    assert sorted(data["runs"]) == sorted(f"{n}/{s}" for n in range(2, 7) for s in range(1, n + 1))
    assert data["max_layers"] == 6 and data["start"] == [6, 2]


def test_explorer_counts_match_torch_checkpoint_sequential(data):
    x = torch.randn(1, 4)
    for key, run in data["runs"].items():
        n, s = map(int, key.split("/"))
        stack = mlp(n, 4)
        h = x.detach().requires_grad_()
        ref = measure(partial(torch_checkpoint_sequential, stack, s, h, use_reentrant=False), stack)
        assert run["held"] == ref.saved_bytes // x.nbytes
        assert run["recomputed"] == ref.recomputed


def test_layer_events_run_every_layer_forward_then_backward_in_reverse():
    stack = mlp(4, 4)
    stats, events = page.layer_events(stack, 1, torch.randn(1, 4))
    assert events.split() == ["F1", "F2", "F3", "F4", "B4", "B3", "B2", "B1"]
    assert stats.recomputed == 0


def test_layer_events_mark_recomputed_layers():
    stats, events = page.layer_events(mlp(4, 4), 2, torch.randn(1, 4))
    assert [e for e in events.split() if e.startswith("R")] == ["R1", "R2"]
    assert stats.recomputed == 2


def test_static_table_lists_one_row_per_segment_count():
    data = page.explorer(max_layers=4, start=(4, 2))
    html = page.static_table(data, n_layers=4)
    assert html.count("<tr>") == 1 + 3  # header, segments 1, 2 and 4
    assert f'<td style="text-align: right;">{data["runs"]["4/2"]["held"]}</td>' in html


def _bench(tmp_path, name, device_type, seconds):
    rows = [
        {"k": k, "seconds": t, "peak_bytes": 2**20, "saved_activations": 1.0, "recomputed": 0}
        for k, t in seconds.items()
    ]
    run = {
        "device": "Test CPU",
        "device_type": device_type,
        "torch": "2.13.0",
        "cpu_threads": 2,
        "date": "2026-11-22",
        "checkpointing": {"n_layers": 64, "width": 8, "batch": 8, "rows": rows},
    }
    (tmp_path / name).write_text(json.dumps(run), encoding="utf-8")


def test_committed_reads_runs_and_wall_ratio(tmp_path):
    _bench(tmp_path, "bench-cpu-a.json", "cpu", {64: 2.0, 8: 3.0})
    runs = page.committed(tmp_path)
    cpu = page.first_run(runs, "cpu")
    assert page.wall_ratio(cpu) == pytest.approx(1.5)
    assert page.run_label(cpu) == (
        "Test CPU, 2 threads, torch 2.13.0, 2026-11-22, results/bench-cpu-a.json"
    )
    assert page.gpu_table(runs) == ""


def test_committed_rejects_a_run_without_a_sweep(tmp_path):
    (tmp_path / "bench-x.json").write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match="bench-x.json has no 'checkpointing' sweep"):
        page.committed(tmp_path)


def test_first_run_names_the_missing_device(tmp_path):
    _bench(tmp_path, "bench-cpu-a.json", "cpu", {64: 2.0, 8: 3.0})
    with pytest.raises(ValueError, match="no committed result for device_type 'cuda'"):
        page.first_run(page.committed(tmp_path), "cuda")


def test_gpu_table_has_one_row_per_segment_length(tmp_path):
    _bench(tmp_path, "bench-cuda-a.json", "cuda", {64: 0.002, 8: 0.003})
    out = page.gpu_table(page.committed(tmp_path))
    assert "results/bench-cuda-a.json" in out
    assert out.count("\n|") == 2 + 2  # header, rule, two rows


def test_committed_repository_results_have_a_cpu_run():
    assert page.first_run(page.committed(), "cpu")["checkpointing"]["n_layers"] == 64
