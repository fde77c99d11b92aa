"""Tests for gradflow_ref.optimizer: stochastic rounding, Kahan summation and the BF16 AdamW,
held against torch (FP32 and float64 sums, torch.optim.AdamW)."""

import pytest
import torch
from torch import nn

import gradflow_ref.optimizer as ref


def _neighbours(x: torch.Tensor):
    """The BF16 values just below and just above each FP32 element (torch's own rounding)."""
    down = x.to(torch.bfloat16)  # nearest; then step to the other side where needed
    lo = torch.where(down.float() > x, torch.nextafter(down, torch.full_like(down, -1e30)), down)
    hi = torch.where(lo.float() < x, torch.nextafter(lo, torch.full_like(lo, 1e30)), lo)
    return lo.float(), hi.float()


def test_stochastic_round_returns_one_of_the_two_neighbours():
    x = torch.randn(10_000) * torch.logspace(-6, 3, 10_000)
    r = ref.stochastic_round(x, torch.Generator().manual_seed(0)).float()
    lo, hi = _neighbours(x)
    assert bool(((r == lo) | (r == hi)).all())


def test_stochastic_round_is_unbiased_in_expectation():
    # 1.001 lies p = 0.128 of a spacing above 1.0: the mean of n draws has std
    # spacing * sqrt(p (1 - p) / n)
    x = torch.full((200_000,), 1.001)
    r = ref.stochastic_round(x, torch.Generator().manual_seed(0)).double()
    sd = 2**-7 * (0.128 * 0.872 / 200_000) ** 0.5
    assert abs(r.mean().item() - x[0].item()) < 5 * sd


def test_stochastic_round_is_unbiased_for_negative_values():
    x = torch.full((200_000,), -3.3)
    r = ref.stochastic_round(x, torch.Generator().manual_seed(1)).double()
    assert abs(r.mean().item() - x[0].item()) < 5 * 2**-6 * (0.25 / 200_000) ** 0.5


def test_stochastic_round_is_unbiased_just_below_a_power_of_two():
    # 2 - 2**-9 lies 3/4 of the way from 1.9921875 to 2.0; rounding up crosses into the next
    # binade, for either sign
    x = torch.tensor([2 - 2**-9, -(2 - 2**-9)]).repeat(200_000, 1)
    r = ref.stochastic_round(x, torch.Generator().manual_seed(2)).double()
    assert set(r.abs().unique().tolist()) == {1.9921875, 2.0}
    sd = 2**-7 * (0.75 * 0.25 / 200_000) ** 0.5
    torch.testing.assert_close(r.mean(0), x[0].double(), rtol=0, atol=5 * sd)


def test_stochastic_round_keeps_nan_whatever_its_low_bits():
    # NaNs whose low 16 bits are set: adding noise could carry them into inf or wrap them to 0
    bits = torch.tensor([0x7F800001, 0x7FFFFFFF, -1], dtype=torch.int32)
    r = ref.stochastic_round(bits.view(torch.float32), torch.Generator().manual_seed(0))
    assert bool(torch.isnan(r).all())


def test_stochastic_round_keeps_bf16_values_and_non_finite_values():
    x = torch.tensor([1.0, -0.5, 0.0, float("inf"), float("-inf"), 3.0e38])
    r = ref.stochastic_round(x, torch.Generator().manual_seed(0))
    assert r.dtype == torch.bfloat16
    torch.testing.assert_close(r[:5].float(), x[:5], rtol=0, atol=0)
    assert torch.isnan(ref.stochastic_round(torch.tensor([float("nan")]))).all()


def test_stochastic_round_rejects_a_bfloat16_input():
    with pytest.raises(TypeError, match="`x` must be a float32 tensor, got torch.bfloat16"):
        ref.stochastic_round(torch.ones(2, dtype=torch.bfloat16))


def test_kahan_add_recovers_the_fp32_sum():
    w = torch.ones(3, dtype=torch.bfloat16)
    comp = torch.zeros_like(w)
    steps = torch.tensor([1e-4, -3e-5, 2.5e-4])
    for _ in range(1000):
        ref.kahan_add_(w, comp, steps)
    exact = (1 + 1000 * steps.double()).float()
    # the weight is the exact sum rounded to BF16 (round to nearest would have stayed at 1.0)
    torch.testing.assert_close(w.float(), exact.bfloat16().float(), rtol=0, atol=0)


def test_kahan_add_rejects_an_fp32_weight():
    with pytest.raises(TypeError, match="`weight` must be a bfloat16 tensor, got torch.float32"):
        ref.kahan_add_(torch.ones(2), torch.zeros(2, dtype=torch.bfloat16), torch.ones(2))


def test_kahan_add_rejects_mismatched_shapes():
    w = torch.ones(2, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="must have the same shape"):
        ref.kahan_add_(w, torch.zeros(3, dtype=torch.bfloat16), torch.ones(2))


def test_add_nearest_matches_torch_in_place_add():
    w = torch.tensor([1.0, 0.02, -7.0], dtype=torch.bfloat16)
    theirs = w.clone()
    u = torch.tensor([1e-4, 3e-4, -0.03])
    ref.add_(w, u, "nearest", {})
    theirs += u
    torch.testing.assert_close(w, theirs, rtol=0, atol=0)


def test_add_rejects_an_unknown_method():
    w = torch.ones(1, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="`method` must be one of 'nearest'"):
        ref.add_(w, torch.ones(1), "round", {})


def test_trajectory_nearest_stays_and_master_follows_fp32():
    near = ref.trajectory(1.0, 1e-4, 1000, "nearest")
    master = ref.trajectory(1.0, 1e-4, 1000, "master")
    fp32 = torch.ones(1)
    for _ in range(1000):
        fp32 += 1e-4
    assert near[-1].item() == 1.0
    assert master[-1].item() == fp32.bfloat16().item()


def test_trajectory_stochastic_mean_is_the_exact_sum():
    final = ref.trajectory(1.0, 1e-4, 1000, "stochastic", copies=400, seed=3)[-1].double()
    # 1000 roundings of spacing 2**-7 with p ~ 0.0128: std per copy ~ 0.028, of the mean ~0.0014
    assert abs(final.mean().item() - 1.1) < 0.007


def test_trajectory_rejects_zero_steps():
    with pytest.raises(ValueError, match="`steps` must be an integer from 1 to 1000000, got 0"):
        ref.trajectory(1.0, 1e-4, 0, "nearest")


def _model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))


def _grads(seed):
    """One gradient per parameter of _model(), drawn from `seed`, in FP32."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(p.shape, generator=gen) * 1e-2 for p in _model().parameters()]


def test_adamw_matches_torch_on_fp32_parameters():
    ours, theirs = _model(), _model()
    kw = dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    opt_ours = ref.AdamW(ours.parameters(), **kw)
    opt_theirs = torch.optim.AdamW(theirs.parameters(), foreach=False, **kw)
    for step in range(20):
        for p, q, g in zip(ours.parameters(), theirs.parameters(), _grads(step)):
            p.grad, q.grad = g.clone(), g.clone()
        opt_ours.step()
        opt_theirs.step()
    for p, q in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-7)


def test_adamw_master_matches_torch_on_fp32_parameters():
    ours, theirs = _model().bfloat16(), _model()
    with torch.no_grad():  # start both from the same BF16-representable weights
        for p, q in zip(ours.parameters(), theirs.parameters()):
            q.copy_(p.float())
    kw = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    opt_ours = ref.AdamW(ours.parameters(), rounding="master", **kw)
    opt_theirs = torch.optim.AdamW(theirs.parameters(), foreach=False, **kw)
    for step in range(50):
        for p, q, g in zip(ours.parameters(), theirs.parameters(), _grads(step)):
            p.grad, q.grad = g.bfloat16(), g.bfloat16().float()
        opt_ours.step()
        opt_theirs.step()
    for p, q in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(opt_ours.state[p]["master"], q.detach(), rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(p, q.detach().bfloat16(), rtol=0, atol=0)


def test_adamw_nearest_on_bf16_loses_updates_the_master_keeps():
    near, master = _model().bfloat16(), _model().bfloat16()
    start = [p.detach().clone() for p in near.parameters()]
    kw = dict(lr=1e-5, weight_decay=0.0)
    opts = [
        ref.AdamW(near.parameters(), **kw),
        ref.AdamW(master.parameters(), rounding="master", **kw),
    ]
    for step in range(30):
        for m, opt in zip((near, master), opts):
            for p, g in zip(m.parameters(), _grads(step)):
                p.grad = g.bfloat16()
            opt.step()
    moved = [
        sum(int((p != s).sum()) for p, s in zip(m.parameters(), start)) for m in (near, master)
    ]
    assert moved[0] < moved[1] / 2


def test_adamw_keeps_bf16_moments_when_asked():
    model = _model().bfloat16()
    opt = ref.AdamW(model.parameters(), moment_dtype=torch.bfloat16, rounding="kahan")
    for p, g in zip(model.parameters(), _grads(0)):
        p.grad = g.bfloat16()
    opt.step()
    state = opt.state[next(iter(model.parameters()))]
    assert state["exp_avg"].dtype == state["exp_avg_sq"].dtype == torch.bfloat16
    assert state["comp"].dtype == torch.bfloat16


def test_adamw_rejects_an_unknown_rounding():
    with pytest.raises(ValueError, match="`rounding` must be one of"):
        ref.AdamW(_model().parameters(), rounding="up")


def test_adamw_rejects_beta_of_one():
    with pytest.raises(ValueError, match="`betas\\[1\\]` must be below 1, got 1"):
        ref.AdamW(_model().parameters(), betas=(0.9, 1.0))


def test_adamw_rejects_float16_parameters():
    with pytest.raises(
        TypeError, match="parameters must be float32 or bfloat16, got torch.float16"
    ):
        ref.AdamW(_model().half().parameters())
