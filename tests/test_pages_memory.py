"""Builders of chapter 7's memory endgame (gradflow_site/pages/memory.py)."""

from __future__ import annotations

import pytest
import torch

from gradflow_ref.memory import training_memory
from gradflow_ref.sharding import FSDPRun, sharded_memory
from gradflow_site.pages import memory


def test_preset_uses_the_trainers_layout():
    cfg = memory.preset("7B")
    assert (cfg.param_dtype, cfg.master_dtype, cfg.grad_dtype) == (
        torch.bfloat16,
        torch.float32,
        torch.float32,
    )
    assert cfg.n_params == 7_000_000_000


def test_preset_rejects_an_unknown_name():
    with pytest.raises(ValueError, match="`name` must be one of"):
        memory.preset("8B")


def test_zero_table_rows_are_the_sharded_totals():
    cfg = memory.preset("13B")
    text = memory.zero_table(cfg, 8)
    for stage in range(4):
        assert f"**{sharded_memory(cfg, 8, stage).total / 1e9:.1f}**" in text
    assert f"**{training_memory(cfg).total / 1e9:.1f}**" in text  # stage 0 is the full budget


def test_fits_13b_on_8_h100_needs_stage_2():
    cfg = memory.preset("13B")
    assert [memory.fits(cfg, 8, s) for s in range(4)] == [False, False, True, True]


def test_fsdp_table_marks_a_difference():
    text = memory.fsdp_table([FSDPRun(8, 8, 16)], [FSDPRun(8, 4, 16)])
    assert "| 0 | gradients | 8 | 4 | off by +4 |" in text
    assert text.count("equal") == 2


def test_sharding_data_names_every_stage_and_gpu():
    data = memory.sharding_data()
    assert data["stages"]["0"] == [] and "weights" in data["stages"]["3"]
    assert dict(data["gpus"])["H100 SXM"] == 80e9
    assert data["defaults"]["gpu"] in dict(data["gpus"])
