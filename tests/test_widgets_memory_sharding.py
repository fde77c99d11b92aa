"""The memory calculator's sharding (chapter 7b): GF.logic.memory.sharded against gradflow_ref."""

from __future__ import annotations

import pytest
import torch

from gradflow_ref.memory import MemoryConfig, training_memory
from gradflow_ref.sharding import sharded_memory
from tests._browser import open_page

pytestmark = [pytest.mark.build, pytest.mark.browser]

CONFIGS = [
    dict(n_params=7_000_000_000, n_layers=32, hidden=4096, n_heads=32, seq_len=4096, vocab=32000),
    dict(
        n_params=13_000_000_000,
        n_layers=40,
        hidden=5120,
        n_heads=40,
        seq_len=4096,
        vocab=32000,
        checkpointing="full",
    ),
    dict(n_layers=2, hidden=64, n_heads=4, seq_len=16, vocab=101, grad_dtype="float32"),
]


def as_torch(cfg: dict) -> dict:
    return {k: getattr(torch, v) if k.endswith("_dtype") else v for k, v in cfg.items()}


def test_sharded_matches_gradflow_ref_to_the_byte(browser, server):
    with open_page(browser, server, "memory/") as (page, record):
        for cfg in CONFIGS:
            for n in (1, 3, 8, 1024):
                for stage in range(4):
                    ours = page.evaluate(
                        "([cfg, n, stage]) => GF.logic.memory.sharded("
                        "GF.logic.memory.breakdown(cfg), n, stage)",
                        [cfg, n, stage],
                    )
                    want = sharded_memory(MemoryConfig(**as_torch(cfg)), n, stage).as_dict()
                    assert ours == want, (cfg, n, stage)
        assert training_memory(MemoryConfig(**as_torch(CONFIGS[0]))).total > 80e9
        assert not record["errors"]


def test_calculator_says_whether_one_gpus_share_fits(browser, server):
    with open_page(browser, server, "memory/") as (page, record):
        widget = page.locator('[data-gf-widget="memory"]')
        widget.get_by_label("Preset").select_option("13B")
        widget.get_by_label("Checkpointing").select_option("full")
        widget.get_by_label("Data-parallel GPUs").fill("8")
        status = widget.locator(".gf-status")
        for stage, fits in (("0", "false"), ("3", "true")):
            widget.get_by_label("Sharding").select_option(stage)
            assert status.get_attribute("data-fits") == fits
        assert "which fits the H100 SXM" in status.text_content()
        # the chart and the table show that share, and say so
        assert "per GPU" in widget.locator("svg.gf-chart").first.get_attribute("aria-label")
        assert "per GPU" in widget.locator(".gf-memory__scroll").get_attribute("aria-label")
        assert "Bytes per GPU" in widget.locator(".gf-memory__table thead").text_content()
        assert not record["errors"]
