"""Builders of docs/cheatsheet.md (gradflow_site/pages/cheatsheet.py): counted costs, committed
speeds and their labels."""

from __future__ import annotations

import runpy

import pytest

from gradflow_site.pages import cheatsheet as sheet


@pytest.fixture(scope="module")
def cost():
    return sheet.costs()


def test_costs_match_the_formats_byte_counts(cost):
    assert cost.activation_ratio == 0.5  # BF16 stores 2 bytes where FP32 stores 4
    assert cost.weight_ratio == 1.5  # 2-byte BF16 weights + 4-byte FP32 master over 4 bytes
    assert cost.accum_memory == 4.0  # one micro-batch of 16 against a batch of 64


def test_costs_checkpointing_saves_more_memory_at_64_layers_than_at_16(cost):
    assert cost.ckpt_memory[64] > cost.ckpt_memory[16] > 1
    assert cost.ckpt_compute == pytest.approx(cost.ckpt64.recomputed / (3 * 64), rel=1e-12)
    assert 0 < cost.ckpt_compute < 1 / 3


def test_costs_equal_what_the_snippet_prints(cost, capsys):
    shown = runpy.run_path(str(sheet.SNIPPET))
    capsys.readouterr()
    for name in ("ckpt_memory", "ckpt_compute", "activation_ratio", "weight_ratio"):
        assert getattr(cost, name) == shown[name], name


def test_costs_rejects_a_snippet_without_its_sections(tmp_path):
    snippet = tmp_path / "cheatsheet.py"
    snippet.write_text("# --8<-- [start:setup]\nx = 1\n# --8<-- [end:setup]\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no section 'checkpoint_costs'"):
        sheet.costs(snippet)


def test_state_bytes_per_param_is_autocasts_sixteen():
    assert sheet.state_bytes_per_param() == 4 + 4 + 8  # FP32 params, FP32 grads, two moments
