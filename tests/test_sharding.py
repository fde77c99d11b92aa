"""ZeRO stages and FSDP2: the per-GPU memory model, held against a real FSDP2 run on CPU."""

from __future__ import annotations

import math
import multiprocessing

import pytest
import torch

from gradflow_ref.memory import GPT, MemoryConfig, training_memory
from gradflow_ref.sharding import (
    FSDPRun,
    chunk_rows,
    fsdp2_step,
    measure_fsdp2,
    predict_fsdp2,
    sharded_memory,
)

SEVEN_B = MemoryConfig(n_layers=32, hidden=4096, n_heads=32, n_params=7_000_000_000)
SMALL = MemoryConfig(n_layers=2, hidden=64, n_heads=4, seq_len=16, vocab=101)
TINY = MemoryConfig(n_layers=1, hidden=8, n_heads=2, seq_len=4, vocab=11)


def _odd_heads():
    return MemoryConfig(n_layers=1, hidden=10, n_heads=3, seq_len=4, vocab=11)


# FSDP2 with a BF16 MixedPrecisionPolicy keeps FP32 parameters (they are the master weights)
# and FP32 gradients; BF16 copies exist only while a layer runs
FSDP_LAYOUT = dict(param_dtype=torch.float32, master_dtype=None, grad_dtype=torch.float32)


def test_sharded_memory_stage_0_is_plain_data_parallel():
    assert sharded_memory(SEVEN_B, 8, 0) == training_memory(SEVEN_B)


@pytest.mark.parametrize(
    ("stage", "sharded"),
    [
        (1, {"master_weights", "optimizer_states"}),
        (2, {"master_weights", "optimizer_states", "gradients"}),
        (3, {"master_weights", "optimizer_states", "gradients", "weights"}),
    ],
)
def test_sharded_memory_divides_what_the_stage_shards(stage, sharded):
    full, one = training_memory(SEVEN_B).as_dict(), sharded_memory(SEVEN_B, 8, stage).as_dict()
    for part in ("weights", "master_weights", "gradients", "optimizer_states", "activations"):
        assert one[part] == (-(-full[part] // 8) if part in sharded else full[part]), part


@pytest.mark.parametrize(("rows", "n"), [(7, 2), (8, 2), (3, 4), (101, 2), (1, 8)])
def test_chunk_rows_matches_torch_chunk(rows, n):
    chunks = [len(c) for c in torch.arange(rows).chunk(n)]
    chunks += [0] * (n - len(chunks))
    assert [chunk_rows(rows, n, r) for r in range(n)] == chunks


def test_measure_fsdp2_holds_what_the_model_predicts():
    runs = measure_fsdp2(SMALL, n_ranks=2)
    shapes = [tuple(p.shape) for p in GPT(SMALL).parameters()]
    assert runs == [predict_fsdp2(shapes, 2, rank) for rank in range(2)]
    # and together the ranks hold exactly the unsharded FP32 state, split once
    full = training_memory(MemoryConfig(**{**vars(SMALL), **FSDP_LAYOUT}))
    assert sum(r.parameters for r in runs) == full.weights
    assert sum(r.gradients for r in runs) == full.gradients
    assert sum(r.optimizer_states for r in runs) == full.optimizer_states
    assert multiprocessing.active_children() == []


def test_predict_fsdp2_splits_rows_like_torch_chunk():
    assert predict_fsdp2([(7, 2)], 2, 1) == FSDPRun(4 * 3 * 2, 4 * 3 * 2, 8 * 3 * 2)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: sharded_memory(None, 8, 3), TypeError, "`cfg` must be a MemoryConfig"),
        (lambda: sharded_memory(SEVEN_B, 0, 3), ValueError, "`n_gpus` must be an integer >= 1"),
        (lambda: sharded_memory(SEVEN_B, 2.5, 3), TypeError, "`n_gpus` must be an int"),
        (lambda: sharded_memory(SEVEN_B, 8, 4), ValueError, "`stage` must be one of 0, 1, 2, 3"),
        (lambda: sharded_memory(SEVEN_B, 8, True), ValueError, "`stage` must be one of 0, 1, 2"),
        (lambda: predict_fsdp2([(4,)], 2, 2), ValueError, "`rank` must be in 0..1"),
        (lambda: measure_fsdp2("small"), TypeError, "`cfg` must be a MemoryConfig"),
        (lambda: predict_fsdp2([(4, -4)], 2, 0), ValueError, r"predict_fsdp2: `shapes\[0\]`"),
        (lambda: predict_fsdp2([(4, 4)], 0, 0), ValueError, "predict_fsdp2: `n_ranks`"),
        (lambda: predict_fsdp2([()], 2, 0), ValueError, "at least one dimension"),
        (lambda: predict_fsdp2([(4.5, 2)], 2, 0), TypeError, r"`shapes\[0\]` must be an int"),
        (lambda: predict_fsdp2(None, 2, 0), TypeError, "predict_fsdp2: `shapes`"),
        (lambda: chunk_rows(-5, 2, 0), ValueError, "chunk_rows: `rows`"),
        (lambda: chunk_rows(5, 0, 0), ValueError, "chunk_rows: `n_ranks`"),
        (lambda: chunk_rows(5, 2, 7), ValueError, "chunk_rows: `rank` must be in 0..1"),
        (lambda: measure_fsdp2(_odd_heads()), ValueError, "`hidden` .10. must be divisible"),
        (lambda: measure_fsdp2(TINY, 10**6), ValueError, "measure_fsdp2: `n_ranks` must be at"),
        (lambda: measure_fsdp2(TINY, 2, math.inf), ValueError, "measure_fsdp2: `timeout_s`"),
        (lambda: measure_fsdp2(TINY, 2, "x"), TypeError, "measure_fsdp2: `timeout_s`"),
        (lambda: fsdp2_step(-1, 2, TINY), ValueError, "fsdp2_step: `rank`"),
        (lambda: fsdp2_step(0, 0, TINY), ValueError, "fsdp2_step: `world_size`"),
        (lambda: FSDPRun(-32, 0, 0), ValueError, "FSDPRun: `parameters`"),
        (lambda: FSDPRun(None, 0, 0), TypeError, "FSDPRun: `parameters`"),
    ],
)
def test_sharding_rejects_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
