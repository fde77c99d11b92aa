"""Builders of docs/memory.md (gradflow_site/pages/memory.py)."""

from __future__ import annotations

import inspect
import re

import pytest
import torch

from gradflow_ref.memory import MemoryConfig, training_memory
from gradflow_ref.sharding import FSDPRun, sharded_memory
from gradflow_site.pages import memory


def test_preset_uses_autocasts_layout():
    cfg = memory.preset("7B")
    assert (cfg.param_dtype, cfg.master_dtype, cfg.grad_dtype) == (
        torch.float32,
        None,
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


SHAPE = dict(n_params=7_000_000_000, n_layers=32, hidden=4096, n_heads=32, seq_len=4096)
SHAPE |= dict(micro_batch=1, vocab=32000, dropout=False, stores_scores=False)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def test_memory_data_opens_on_autocasts_layout():
    data = memory.memory_data(SHAPE)
    key = data["defaults"]["precision"]
    assert key == memory.DEFAULT_PRECISION
    layout = {k: v for k, v in data["precisions"][key].items() if k != "label"}
    # torch.autocast: FP32 parameters (the masters), FP32 gradients and AdamW states
    assert layout == {
        "param_dtype": "float32",
        "master_dtype": None,
        "grad_dtype": "float32",
        "state_dtype": "float32",
        "activation_dtype": "bfloat16",
    }
    seven = next(p for p in data["presets"] if p["name"] == data["defaults"]["preset"])
    opened = {
        k: seven[k] for k in ("n_params", "n_layers", "hidden", "n_heads", "seq_len", "vocab")
    }
    opened |= {k: DTYPES[v] if v else None for k, v in layout.items()}
    opened |= {k: data["defaults"][k] for k in ("micro_batch", "stores_scores", "dropout")}
    assert training_memory(MemoryConfig(**opened)) == training_memory(MemoryConfig(**SHAPE))


def test_memory_data_carries_the_sharding_payload():
    assert memory.memory_data(SHAPE)["sharding"] == memory.sharding_data()


def test_memory_data_rejects_a_shape_other_than_the_7b_preset():
    with pytest.raises(ValueError, match="7B preset"):
        memory.memory_data(SHAPE | {"hidden": 4000})


def test_bytes_per_param_adds_the_itemsizes_of_each_layout():
    got = memory.bytes_per_param(SHAPE)
    for key, (_, param, master, grad, state, _) in memory.PRECISIONS.items():
        want = param.itemsize + (master.itemsize if master else 0) + grad.itemsize
        assert got[key] == want + 2 * state.itemsize, key  # AdamW: two states
    assert (got["autocast_bf16"], got["trainer_bf16"], got["fp32"]) == (16, 18, 16)


def test_layout_sizes_names_every_preset():
    text = memory.layout_sizes(memory.memory_data(SHAPE))
    assert [m.group(1) for m in re.finditer(r"\((\w+(?:\.\d)?[MB])\)", text)] == list(
        memory.PRESETS
    )


def test_memory_widget_is_the_memory_calculator_with_a_static_table():
    markup = memory.memory_widget(memory.memory_data(SHAPE))
    assert 'data-gf-widget="memory"' in markup
    assert memory.PRECISIONS[memory.DEFAULT_PRECISION][0] in markup


def test_zero_table_has_no_master_column_when_the_parameters_are_the_masters():
    assert "| master |" not in memory.zero_table(memory.preset("7B"), 8)
    trainer = memory.preset("7B", precision="trainer_bf16")
    assert "| master |" in memory.zero_table(trainer, 8)


def test_layout_rejects_an_unknown_key():
    with pytest.raises(ValueError, match="`key` must be one of"):
        memory.layout("int8")


def _step_body(source: str) -> list[str]:
    """The lines of an FSDP2 step from joining the process group to leaving it, comments off."""
    lines = [line.split("  #")[0].rstrip() for line in source.splitlines()]
    start = next(i for i, line in enumerate(lines) if "dist.init_process_group" in line)
    end = next(i for i, line in enumerate(lines) if "dist.destroy_process_group()" in line)
    indent = len(lines[start]) - len(lines[start].lstrip())
    return [line[indent:] for line in lines[start : end + 1] if line.strip()]


def test_fsdp2_step_shown_is_the_step_measure_fsdp2_runs():
    # the page shows the step a reader runs under torchrun; measure_fsdp2 runs the reference's
    from gradflow_ref import sharding
    from tests._site import ROOT

    text = (ROOT / "snippets/memory.py").read_text(encoding="utf-8")
    shown = re.search(r"\[start:fsdp2_step\]\n(.*?)# --8<-- \[end:fsdp2_step\]", text, re.S)
    assert _step_body(shown.group(1)) == _step_body(inspect.getsource(sharding.fsdp2_step))
