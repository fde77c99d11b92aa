"""Tests for gradflow_ref.master: the FP32-master BF16 pipeline against torch.autocast and FP32."""

import pytest
import torch
from torch import nn

from gradflow_ref.master import MasterWeights, training_state_bytes


@pytest.fixture(autouse=True)
def _one_thread():
    """Run these tiny BF16 models on one thread: on a busy 2-core machine, thread hand-offs
    cost more than the matrix products themselves (about 15x slower, measured)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _data(seed: int = 0):
    """Inputs and the outputs of a random teacher network of the student's shape."""
    torch.manual_seed(seed)
    teacher = nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))
    x = torch.randn(256, 8)
    return x, teacher(x).detach()


def _net(seed: int = 1) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 32), nn.Tanh(), nn.Linear(32, 1))


def _train_master(steps: int, lr: float = 1e-3, device: str = "cpu"):
    x, y = (t.to(device) for t in _data())
    mw = MasterWeights(_net().to(device))
    opt = torch.optim.Adam(mw.params, lr=lr)
    losses, zero = [], []
    for _ in range(steps):
        before = [m.detach().clone() for m in mw.params]
        loss = (mw.model(x.bfloat16()).float() - y).pow(2).mean()
        loss.backward()
        mw.grads_to_master()
        opt.step()
        mw.master_to_model()
        mw.zero_grad()
        losses.append(loss.item())
        zero.append(_zero_fraction(before, mw.params))
    return mw, losses, zero


def _zero_fraction(before, after) -> float:
    same = sum((a == b).sum().item() for a, b in zip(before, after))
    return same / sum(a.numel() for a in after)


def test_master_weights_params_are_fp32_copies():
    net = _net()
    want = [p.detach().clone() for p in net.parameters()]
    mw = MasterWeights(net)
    assert all(m.dtype == torch.float32 for m in mw.params)
    assert all(p.dtype == torch.bfloat16 for p in mw.model.parameters())
    for m, w, p in zip(mw.params, want, mw.model.parameters()):
        torch.testing.assert_close(m.detach(), w, rtol=0, atol=0)
        assert torch.equal(p.detach(), w.bfloat16())


def test_grads_to_master_casts_model_grads_to_fp32():
    mw = MasterWeights(_net())
    x, y = _data()
    (mw.model(x.bfloat16()).float() - y).pow(2).mean().backward()
    mw.grads_to_master()
    for p, m in zip(mw.model.parameters(), mw.params):
        assert m.grad.dtype == torch.float32
        assert torch.equal(m.grad, p.grad.float())


def test_master_to_model_rounds_like_torch_cast():
    mw = MasterWeights(_net())
    with torch.no_grad():
        for m in mw.params:
            m.add_(1e-3)
    mw.master_to_model()
    for p, m in zip(mw.model.parameters(), mw.params):
        assert torch.equal(p.detach(), m.detach().to(torch.bfloat16))


def test_zero_grad_clears_model_and_master():
    mw = MasterWeights(_net())
    x, y = _data()
    (mw.model(x.bfloat16()).float() - y).pow(2).mean().backward()
    mw.grads_to_master()
    mw.zero_grad()
    assert all(p.grad is None for p in mw.model.parameters())
    assert all(m.grad is None for m in mw.params)


def test_master_weights_matches_autocast_bitwise():
    # torch.autocast casts the FP32 weights to BF16 for each matmul and accumulates the BF16
    # weight gradients into FP32 .grad: the same arithmetic, so tolerance 0 on CPU.
    x, y = _data()
    ref = _net()
    opt = torch.optim.Adam(ref.parameters(), lr=1e-3)
    ref_losses = []
    for _ in range(20):
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            out = ref(x)
        loss = (out.float() - y).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        ref_losses.append(loss.item())
    mw, losses, _ = _train_master(20)
    assert losses == ref_losses
    for m, p in zip(mw.params, ref.parameters()):
        torch.testing.assert_close(m.detach(), p.detach(), rtol=0, atol=0)


def test_master_weights_keeps_learning_where_pure_bf16_stalls():
    steps = 200
    _, master_losses, master_zero = _train_master(steps)
    x, y = _data()
    net = _net().bfloat16()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    bf16_losses, bf16_zero = [], []
    for _ in range(steps):
        before = [p.detach().clone() for p in net.parameters()]
        loss = (net(x.bfloat16()).float() - y).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        bf16_losses.append(loss.item())
        bf16_zero.append(_zero_fraction(before, list(net.parameters())))
    late = slice(steps // 2, steps)
    assert sum(bf16_zero[late]) / (steps // 2) > 0.5  # most BF16 updates round away
    assert sum(master_zero) / steps < 0.01  # FP32 masters keep moving
    assert master_losses[-1] < 0.8 * bf16_losses[-1]


def test_training_state_bytes_is_16_per_param_for_bf16_master_adam():
    mw = MasterWeights(_net())
    opt = torch.optim.Adam(mw.params, lr=1e-3)
    x, y = _data()
    (mw.model(x.bfloat16()).float() - y).pow(2).mean().backward()
    mw.grads_to_master()
    opt.step()
    n = sum(m.numel() for m in mw.params)
    b = training_state_bytes(mw.model, opt, mw)
    per = {k: v / n for k, v in b.items()}
    assert (per["weights"], per["grads"], per["master"]) == (2, 2, 4)
    assert (per["exp_avg"], per["exp_avg_sq"], per["master_grads"]) == (4, 4, 4)
    assert per["weights"] + per["grads"] + per["master"] + per["exp_avg"] + per["exp_avg_sq"] == 16


def test_training_state_bytes_is_16_per_param_for_fp32_adam():
    net = _net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    x, y = _data()
    (net(x) - y).pow(2).mean().backward()
    opt.step()
    n = sum(p.numel() for p in net.parameters())
    b = training_state_bytes(net, opt)
    total = b["weights"] + b["grads"] + b["exp_avg"] + b["exp_avg_sq"]
    assert total == 16 * n
    assert b["master"] == b["master_grads"] == 0


def test_master_weights_accepts_float16():
    mw = MasterWeights(_net(), dtype=torch.float16)
    assert {p.dtype for p in mw.model.parameters()} == {torch.float16}


def test_master_weights_rejects_float32_dtype():
    with pytest.raises(ValueError, match="`dtype` must be torch.bfloat16 or torch.float16"):
        MasterWeights(_net(), dtype=torch.float32)


def test_master_weights_rejects_non_module():
    with pytest.raises(TypeError, match="`model` must be a torch.nn.Module"):
        MasterWeights([torch.zeros(2)])


def test_master_weights_rejects_model_without_parameters():
    with pytest.raises(ValueError, match="floating-point parameters"):
        MasterWeights(nn.ReLU())


@pytest.mark.cuda
def test_master_weights_runs_on_cuda_unchanged():
    mw, losses, zero = _train_master(20, device="cuda")
    assert all(m.device.type == "cuda" and m.dtype == torch.float32 for m in mw.params)
    assert losses[-1] < losses[0] and max(zero) == 0.0
