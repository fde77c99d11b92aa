"""Builders of docs/cheatsheet.md (gradflow_site/pages/cheatsheet.py): the figures its rules quote,
and the words the sheet puts around them hold in the records. Chapter 8's own claims (warmup,
QK-norm, z-loss, depth-scaled init, post-LN, width) are held in tests/test_pages_transformer.py;
here, what the sheet adds to them."""

from __future__ import annotations

import pytest

from gradflow_site.pages import arena, sweeps
from gradflow_site.pages import cheatsheet as sheet


@pytest.fixture(scope="module")
def m():
    return sheet.measured()


def _apart(a, b):
    return max(a) < min(b) or max(b) < min(a)


def test_chapter8_code_runs_the_snippets_sections():
    ns = sheet.chapter8_code()
    assert callable(ns["grad_profile"]) and len(ns["val_windows"][0]) == 65


def test_measured_depth_scaled_init_matters_at_48_blocks(m):
    assert len(m.ratio_off) == 3 and m.ratio_on < min(m.ratio_off)
    assert abs(m.ratio_on - 1) < abs(min(m.ratio_off) - 1)


def test_sheet_rules_hold_in_chapter_8s_records(m):
    # post-LN learned only the byte frequencies from some learning rate up
    assert sweeps.collapsed_from(m.lr, m.unigram, setting="post_ln") is not None
    # μP held the best learning rate but its widest model ended worse than the standard's
    best = {mup: sweeps.best_losses(m.width, width=128, mup=mup) for mup in (False, True)}
    assert min(best[True]) > max(best[False])
    # the arena's race ran at a learning rate where chapter 8's short warmup no longer trains
    lr = m.race["config"]["base"]["lr"]
    assert lr not in sweeps.lrs_that_train(m.lr, m.ceiling, setting="baseline")
    assert lr in sweeps.lrs_that_train(m.lr, m.ceiling, setting="warmup")


def test_sheet_rules_hold_in_the_arena(m):
    assert {"no-warmup", "no-clip"} <= set(arena.every_seed(m.race, "higher"))
    assert arena.apart(m.race, "overlapping") == [
        "no-clip",
        "fp32",
        "bf16-pure",
        "fp16",
        "fp16-no-scaler",
        "accum",
        "ckpt",
    ]  # every precision and memory recipe within the full recipe's range
    assert arena.same(m.race) == ["ckpt"]


def test_sheet_sentences_fit_the_gallerys_verdicts(m):
    g = m.gallery_rows  # "skipping helped after ...", "made no difference to the held-out loss"
    assert g["corrupt shard"]["verdict"] == "helped"
    assert g["learning rate too high"]["verdict"] == "helped"
    assert g["attention-logit growth"]["verdict"] == "helped"
    assert g["missing divisor"]["verdict"] == "no difference"
    assert float(g["missing divisor"]["typical_fail"]) > float(g["missing divisor"]["typical_fix"])


def test_state_bytes_per_param_is_autocasts_sixteen():
    assert sheet.state_bytes_per_param() == 4 + 4 + 8  # FP32 params, FP32 grads, two moments
