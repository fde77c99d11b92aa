"""Tests for gradflow_ref.memory: the calculator against bytes counted on a real small GPT."""

import pytest
import torch

from gradflow_ref.checkpointing import SavedTensorMeter, checkpoint
from gradflow_ref.memory import (
    GPT,
    MemoryConfig,
    activation_bytes,
    layer_activation_bytes,
    parameter_count,
    training_memory,
)

ACTIVATION_RTOL = 0.01  # measured 0.45-0.76%: LayerNorm mean/rstd and int64 token ids/targets
SMALL = {"n_layers": 2, "hidden": 64, "n_heads": 4, "seq_len": 32, "micro_batch": 2, "vocab": 96}


def _small(dtype=torch.bfloat16, **kw):
    # CPU dropout keeps its mask in the activation dtype (CUDA: a 1-byte bool mask)
    fields = SMALL | {"param_dtype": dtype, "activation_dtype": dtype, "mask_bytes": dtype.itemsize}
    cfg = MemoryConfig(**(fields | kw))
    torch.manual_seed(0)
    model = GPT(cfg).to(dtype)
    idx = torch.randint(0, cfg.vocab, (cfg.micro_batch, cfg.seq_len))
    return cfg, model, idx, torch.randint(0, cfg.vocab, idx.shape)


def _unmodelled(cfg, layer_norms):
    """Bytes the formula leaves out: LayerNorm mean and rstd, int64 ids/positions/targets."""
    sb = cfg.seq_len * cfg.micro_batch
    stats = layer_norms * 2 * sb * cfg.activation_dtype.itemsize
    return stats + 8 * sb + 8 * cfg.seq_len + 8 * sb + 4  # + cross-entropy's FP32 total weight


def _nbytes(tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def test_parameter_count_matches_gpt_module():
    cfg, model, _, _ = _small()
    assert parameter_count(cfg) == sum(p.numel() for p in model.parameters())


def test_training_memory_state_matches_real_tensors_of_a_bf16_model_with_masters():
    cfg, model, idx, targets = _small(master_dtype=torch.float32)  # Trainer's layout
    model(idx, targets).backward()
    masters = [p.detach().float().requires_grad_(True) for p in model.parameters()]
    for m, p in zip(masters, model.parameters()):
        m.grad = p.grad.float()
    opt = torch.optim.AdamW(masters, lr=1e-3)
    opt.step()
    states = [t for s in opt.state.values() for k, t in s.items() if k != "step"]
    want = training_memory(cfg)
    assert want.weights == _nbytes(model.parameters())
    assert want.master_weights == _nbytes(masters)
    assert want.gradients == _nbytes(m.grad for m in masters)
    assert want.optimizer_states == _nbytes(states)  # exp_avg, exp_avg_sq; not the step counters


def test_training_memory_state_matches_real_tensors_under_autocast():
    cfg, _, idx, targets = _small()
    cfg = MemoryConfig(**(vars(cfg) | {"param_dtype": torch.float32}))  # the default layout
    torch.manual_seed(0)
    model = GPT(cfg)  # FP32 parameters: they are the master weights
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(idx, targets)
    loss.backward()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt.step()
    states = [t for s in opt.state.values() for k, t in s.items() if k != "step"]
    want = training_memory(cfg)
    assert want.weights == _nbytes(model.parameters()) and want.master_weights == 0
    assert want.gradients == _nbytes(p.grad for p in model.parameters())
    assert want.optimizer_states == _nbytes(states)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("dropout", [True, False])
def test_activation_bytes_matches_saved_tensors(dtype, dropout):
    cfg, model, idx, targets = _small(dtype, dropout=dropout)
    with SavedTensorMeter() as meter:
        model(idx, targets)
    torch.testing.assert_close(
        float(meter.bytes), float(activation_bytes(cfg)), rtol=ACTIVATION_RTOL, atol=0.0
    )
    assert meter.bytes == activation_bytes(cfg) + _unmodelled(cfg, 2 * cfg.n_layers + 1)


def test_activation_bytes_full_checkpointing_matches_saved_tensors():
    cfg, model, idx, targets = _small(checkpointing="full")
    with SavedTensorMeter() as meter:
        x = model.embed(idx)
        for layer in model.layers:
            x = checkpoint(layer, x)
        model.head(x, targets)
    held = activation_bytes(cfg) - layer_activation_bytes(cfg)  # minus the layer being rebuilt
    assert meter.bytes == held + _unmodelled(cfg, 1)


def test_layer_activation_bytes_is_korthikanti_formula():
    cfg = MemoryConfig(n_layers=32, hidden=4096, n_heads=32, seq_len=2048, micro_batch=4)
    s, b, h, a = 2048, 4, 4096, 32
    assert layer_activation_bytes(cfg) == s * b * h * (34 + 5 * a * s // h)
    scores = 32 * 5 * a * s * s * b  # the 5as^2b term of all 32 layers
    assert activation_bytes(cfg, "none") - activation_bytes(cfg, "selective") == scores


def test_training_memory_is_16_bytes_per_parameter_for_autocast_adamw():
    m = training_memory(MemoryConfig(n_params=7_000_000_000))  # FP32 params, grads, two moments
    assert (m.weights, m.master_weights, m.gradients, m.optimizer_states) == (28e9, 0, 28e9, 56e9)
    assert m.total == 112e9 + m.activations


def test_training_memory_is_18_bytes_per_parameter_for_trainers_layout():
    layout = dict(param_dtype=torch.bfloat16, master_dtype=torch.float32)
    m = training_memory(MemoryConfig(n_params=1000, **layout))
    assert m.total - m.activations == 18 * 1000  # BF16 weights, FP32 masters, grads, moments


@pytest.mark.parametrize(("optimizer", "states"), [("adamw", 2), ("sgd_momentum", 1), ("sgd", 0)])
def test_training_memory_counts_optimizer_states(optimizer, states):
    m = training_memory(MemoryConfig(n_params=1000, optimizer=optimizer))
    assert m.optimizer_states == 1000 * 4 * states


def test_training_memory_checkpointing_shrinks_activations_only():
    base = MemoryConfig(n_layers=32, hidden=4096, n_heads=32, seq_len=4096, vocab=32000)
    none = training_memory(base)
    full = training_memory(MemoryConfig(**(vars(base) | {"checkpointing": "full"})))
    assert full.activations < none.activations / 10
    assert full.total - full.activations == none.total - none.activations


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"hidden": 100, "n_heads": 3}, "divisible"),
        ({"n_layers": 0}, "`n_layers` must be a positive int"),
        ({"optimizer": "lion"}, "`optimizer` must be one of"),
        ({"checkpointing": "sqrt"}, "`checkpointing` must be one of"),
        ({"n_params": -5}, "`n_params` must be an integer >= 1"),
    ],
)
def test_training_memory_rejects_bad_config(kw, message):
    with pytest.raises(ValueError, match=message):
        training_memory(MemoryConfig(**kw))
