"""The builders of docs/train.md (gradflow_site/pages/train.py), on small made-up runs."""

from __future__ import annotations

import dataclasses

import pytest

from gradflow_site.pages import train as page


def record(step: int, loss: float) -> dict:
    return {"step": step, "loss": loss}


def result(rank: int, world: int, held: list[int], losses: list[float]) -> dict:
    log = [record(s, x) for s, x in enumerate(losses)]
    return {"log": log, "rank": rank, "world": world, "held_bytes": held, "peak_mib": 0}


@pytest.fixture(scope="module")
def cfg():
    train = page.script()
    return train.Config(n_layers=1, hidden=8, n_heads=2, seq_len=4, micro_batch=2, steps=2)


def runs_for(cfg, scale: int = 1) -> dict:
    one, halves = page.predicted(cfg, 1, 0), [page.predicted(cfg, 2, r) for r in (0, 1)]
    held = [[p.parameters * scale, p.gradients, p.optimizer_states] for p in [one, *halves]]
    return {
        "one": result(0, 1, held[0], [5.0, 4.0]),
        "two": [result(r, 2, held[1 + r], [5.0, 4.001]) for r in (0, 1)],
    }


def test_largest_gap_is_the_largest_loss_difference(cfg):
    assert page.largest_gap(runs_for(cfg)) == pytest.approx(0.001)


def test_trajectory_table_lists_every_step_with_its_difference(cfg):
    text = page.trajectory_table(runs_for(cfg))
    assert "| 1 | 4.00000 | 4.00100 | 1.0e-03 |" in text
    assert text.count("\n") == 4  # header, rule, two steps


def test_held_table_shows_measured_and_predicted_bytes(cfg):
    runs = runs_for(cfg)
    text = page.held_table(cfg, runs)
    params = runs["two"][1]["held_bytes"][0]
    assert f"| 1 of 2 | {params:,} ({params:,}) |" in text


def test_held_table_refuses_a_count_that_misses_its_prediction(cfg):
    with pytest.raises(RuntimeError, match="rank 0 of 1 holds"):
        page.held_table(cfg, runs_for(cfg, scale=2))


def test_predicted_halves_the_state_across_two_ranks(cfg):
    one, a, b = page.predicted(cfg, 1, 0), page.predicted(cfg, 2, 0), page.predicted(cfg, 2, 1)
    assert a.parameters + b.parameters == one.parameters
    assert a.optimizer_states == 2 * a.parameters


def test_one_and_two_refuses_an_odd_micro_batch(cfg):
    with pytest.raises(ValueError, match="`cfg.micro_batch` must be even"):
        page.one_and_two(dataclasses.replace(cfg, micro_batch=3))


def test_stop_and_resume_refuses_a_single_step(cfg):
    with pytest.raises(ValueError, match="`cfg.steps` must be at least 2"):
        page.stop_and_resume(dataclasses.replace(cfg, steps=1))
