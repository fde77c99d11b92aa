"""Builders of docs/checkpointing.md (gradflow_site/pages/checkpointing.py)."""

from __future__ import annotations

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
