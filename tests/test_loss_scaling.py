"""Tests for gradflow_ref.loss_scaling: scale histories and parameters held against torch's."""

import math

import pytest
import torch
from torch import nn

from gradflow_ref.loss_scaling import GradScaler, OptState, StaticScaler


def _run(scaler, steps=30, bad=None, opt="sgd", clip=False, dtype=torch.float32, device="cpu"):
    """Train a tiny regression with `scaler`; `bad` maps step -> value written into one grad."""
    bad = bad or {}
    torch.manual_seed(0)
    model = nn.Linear(4, 3).to(device=device, dtype=dtype)
    optimizer = (
        torch.optim.SGD(model.parameters(), lr=0.1)
        if opt == "sgd"
        else torch.optim.Adam(model.parameters(), lr=0.01)
    )
    g = torch.Generator().manual_seed(1)
    history = []
    for step in range(steps):
        x = torch.randn(8, 4, generator=g).to(device=device, dtype=dtype)
        loss = (model(x).float() - 1).pow(2).mean()
        scaler.scale(loss).backward()
        if step in bad:
            model.weight.grad[0, 0] = bad[step]
        if clip:
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        history.append(scaler.get_scale())
    return history, [p.detach().clone() for p in model.parameters()]


INJECTED = {4: math.inf, 5: -math.inf, 11: math.nan, 20: math.inf}


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(growth_interval=3),
        dict(init_scale=1000.0, growth_factor=3.0, backoff_factor=0.3, growth_interval=2),
        dict(init_scale=2.0**126, growth_interval=1),  # growth to inf is refused
    ],
    ids=["default-factors", "odd-factors", "growth-overflow"],
)
def test_grad_scaler_matches_torch_history_and_params(kwargs):
    ours = _run(GradScaler("cpu", **kwargs), bad=INJECTED)
    ref = _run(torch.amp.GradScaler("cpu", **kwargs), bad=INJECTED)
    assert ours[0] == ref[0]
    for a, b in zip(ours[1], ref[1]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_grad_scaler_growth_overflow_keeps_scale():
    history, _ = _run(GradScaler(init_scale=2.0**126, growth_interval=1), steps=3)
    assert history[:2] == [2.0**127, 2.0**127]  # 2**128 is inf in float32: refused


def test_grad_scaler_matches_torch_with_unscale_and_clip_and_adam():
    ours = _run(GradScaler(growth_interval=4), bad=INJECTED, opt="adam", clip=True)
    ref = _run(torch.amp.GradScaler("cpu", growth_interval=4), bad=INJECTED, opt="adam", clip=True)
    assert ours[0] == ref[0]
    for a, b in zip(ours[1], ref[1]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_grad_scaler_matches_torch_on_bf16_grads():
    kw = dict(init_scale=1000.0, backoff_factor=0.3, growth_interval=3)
    ours = _run(GradScaler(**kw), bad=INJECTED, dtype=torch.bfloat16)
    ref = _run(torch.amp.GradScaler("cpu", **kw), bad=INJECTED, dtype=torch.bfloat16)
    assert ours[0] == ref[0]
    for a, b in zip(ours[1], ref[1]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_grad_scaler_state_dict_matches_torch_and_loads_both_ways():
    ours, ref = GradScaler(growth_interval=4), torch.amp.GradScaler("cpu", growth_interval=4)
    _run(ours, steps=7, bad={2: math.inf})
    _run(ref, steps=7, bad={2: math.inf})
    assert ours.state_dict() == ref.state_dict()
    swapped_ours, swapped_ref = GradScaler(), torch.amp.GradScaler("cpu")
    swapped_ours.load_state_dict(ref.state_dict())
    swapped_ref.load_state_dict(ours.state_dict())
    assert _run(swapped_ours, steps=9)[0] == _run(swapped_ref, steps=9)[0]


def test_grad_scaler_skip_leaves_params_and_optimizer_state_untouched():
    scaler, p = GradScaler(), nn.Parameter(torch.ones(3))
    optimizer = torch.optim.Adam([p], lr=0.1)
    scaler.scale((p * torch.tensor([1.0, math.inf, 1.0])).sum()).backward()
    scaler.step(optimizer)
    scaler.update()
    assert torch.equal(p.detach(), torch.ones(3)) and optimizer.state == {}
    assert scaler.get_scale() == 2.0**15 and scaler.skipped_steps == 1


def test_grad_scaler_records_stage_in_order():
    scaler, p = GradScaler(), nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([p], lr=0.1)
    scaler.scale(p.sum()).backward()
    assert scaler._state(optimizer)["stage"] is OptState.READY
    scaler.unscale_(optimizer)
    assert scaler._state(optimizer)["stage"] is OptState.UNSCALED
    scaler.step(optimizer)
    assert scaler._state(optimizer)["stage"] is OptState.STEPPED


def test_grad_scaler_scale_handles_lists_and_tuples():
    scaler = GradScaler(init_scale=4.0)
    a, b = torch.tensor(1.0), torch.tensor(2.0)
    assert [t.item() for t in scaler.scale([a, b])] == [4.0, 8.0]
    assert isinstance(scaler.scale((a, b)), tuple)


def test_grad_scaler_disabled_is_pass_through():
    scaler, p = GradScaler(enabled=False), nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([p], lr=0.5)
    loss = p.sum()
    assert scaler.scale(loss) is loss
    loss.backward()
    scaler.unscale_(optimizer)
    scaler.step(optimizer)
    scaler.update()
    assert torch.equal(p.detach(), torch.full((2,), 0.5))
    assert scaler.get_scale() == 1.0 and scaler.state_dict() == {}


def _scaled_step_setup():
    scaler, p = GradScaler(), nn.Parameter(torch.ones(2))
    optimizer = torch.optim.SGD([p], lr=0.1)
    scaler.scale(p.sum()).backward()
    return scaler, optimizer


def test_grad_scaler_unscale_twice_raises():
    scaler, optimizer = _scaled_step_setup()
    scaler.unscale_(optimizer)
    with pytest.raises(RuntimeError, match="unscale_: already called since the last update"):
        scaler.unscale_(optimizer)


def test_grad_scaler_unscale_after_step_raises():
    scaler, optimizer = _scaled_step_setup()
    scaler.step(optimizer)
    with pytest.raises(RuntimeError, match=r"unscale_: already called .*\(step\(\) ran\)"):
        scaler.unscale_(optimizer)


def test_grad_scaler_step_twice_raises():
    scaler, optimizer = _scaled_step_setup()
    scaler.step(optimizer)
    with pytest.raises(RuntimeError, match="step: already called since the last update"):
        scaler.step(optimizer)


def test_grad_scaler_step_before_scale_raises():
    p = nn.Parameter(torch.ones(2))
    p.sum().backward()
    with pytest.raises(RuntimeError, match=r"step: scale\(\) has not been called"):
        GradScaler().step(torch.optim.SGD([p], lr=0.1))


def test_grad_scaler_update_before_step_raises():
    scaler, _ = _scaled_step_setup()
    with pytest.raises(RuntimeError, match=r"update: no gradients were checked"):
        scaler.update()


def test_grad_scaler_step_rejects_closure():
    scaler, optimizer = _scaled_step_setup()
    with pytest.raises(RuntimeError, match="closures are not supported"):
        scaler.step(optimizer, closure=lambda: 0.0)


def test_grad_scaler_unscale_rejects_fp16_grads_like_torch():
    p = nn.Parameter(torch.ones(2, dtype=torch.float16))
    optimizer = torch.optim.SGD([p], lr=0.1)
    for scaler in (GradScaler(), torch.amp.GradScaler("cpu")):
        p.grad = None
        scaler.scale(p.float().sum()).backward()
        with pytest.raises(ValueError, match="(?i)fp16|float16"):
            scaler.unscale_(optimizer)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(init_scale=0.0), "`init_scale` must be positive and finite"),
        (dict(init_scale=-1.0), "`init_scale` must be positive and finite"),
        (dict(init_scale=math.inf), "`init_scale` must be positive and finite"),
        (dict(init_scale=math.nan), "`init_scale` must be positive and finite"),
        (dict(growth_factor=1.0), "`growth_factor` must be in \\(1.0, inf\\) and finite"),
        (dict(growth_factor=math.inf), "`growth_factor` must be in \\(1.0, inf\\) and finite"),
        (dict(backoff_factor=0.0), r"`backoff_factor` must be in \(0.0, 1.0\)"),
        (dict(backoff_factor=1.0), r"`backoff_factor` must be in \(0.0, 1.0\)"),
        (dict(growth_interval=0), "`growth_interval` must be an integer from 1"),
    ],
)
def test_grad_scaler_rejects_bad_constructor_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        GradScaler(**kwargs)


def test_grad_scaler_rejects_non_integer_growth_interval():
    with pytest.raises(TypeError, match="`growth_interval` must be an int"):
        GradScaler(growth_interval=2.5)


def test_grad_scaler_update_rejects_non_finite_new_scale():
    scaler, optimizer = _scaled_step_setup()
    scaler.step(optimizer)
    with pytest.raises(ValueError, match="`new_scale` must be positive and finite"):
        scaler.update(math.inf)


def test_grad_scaler_update_new_scale_sets_scale():
    scaler, optimizer = _scaled_step_setup()
    scaler.step(optimizer)
    scaler.update(torch.tensor(8.0))
    assert scaler.get_scale() == 8.0


GOOD = {
    "scale": 1024.0,
    "growth_factor": 2.0,
    "backoff_factor": 0.5,
    "growth_interval": 10,
    "_growth_tracker": 3,
}


@pytest.mark.parametrize(
    "state, error, match",
    [
        ({}, ValueError, "empty dict comes from a disabled scaler"),
        ({k: v for k, v in GOOD.items() if k != "scale"}, ValueError, r"missing \['scale'\]"),
        ({**GOOD, "step": 1}, ValueError, r"unknown \['step'\]"),
        ({**GOOD, "scale": "1024"}, TypeError, "`scale` must be a real number .*, got str"),
        ({**GOOD, "scale": -2.0}, ValueError, "`scale` must be positive and finite"),
        ({**GOOD, "backoff_factor": 2.0}, ValueError, "`backoff_factor` must be in"),
        ({**GOOD, "growth_interval": 1.5}, TypeError, "`growth_interval` must be an int"),
        ({**GOOD, "_growth_tracker": -1}, ValueError, "`_growth_tracker` must be an int >= 0"),
        ([("scale", 1.0)], TypeError, "`state_dict` must be a dict, got list"),
    ],
    ids=["empty", "missing", "extra", "type", "negative", "backoff", "interval", "tracker", "list"],
)
def test_grad_scaler_load_state_dict_rejects_malformed(state, error, match):
    with pytest.raises(error, match=match):
        GradScaler().load_state_dict(state)


def test_grad_scaler_load_state_dict_sets_every_entry():
    scaler = GradScaler()
    scaler.load_state_dict(GOOD)
    assert scaler.state_dict() == GOOD


class _HandScaler:
    """Static loss scaling written out by hand: the reference for StaticScaler."""

    def __init__(self, scale):
        self.s = scale

    def scale(self, loss):
        return loss * self.s

    def step(self, optimizer):
        grads = [p.grad for group in optimizer.param_groups for p in group["params"]]
        if all(torch.isfinite(g).all() for g in grads):
            for g in grads:
                g.mul_(1 / self.s)
            optimizer.step()

    def update(self):
        pass

    def get_scale(self):
        return self.s


def test_static_scaler_keeps_scale_and_skips_overflow():
    scaler = StaticScaler(scale=2.0**10)
    history, params = _run(scaler, steps=12, bad={3: math.inf, 7: math.nan})
    ref_history, ref_params = _run(_HandScaler(2.0**10), steps=12, bad={3: math.inf, 7: math.nan})
    assert history == ref_history == [1024.0] * 12 and scaler.skipped_steps == 2
    for a, b in zip(params, ref_params):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_static_scaler_state_dict_round_trip():
    scaler = StaticScaler(scale=512.0)
    assert scaler.state_dict() == {"scale": 512.0}
    other = StaticScaler()
    other.load_state_dict(scaler.state_dict())
    assert other.get_scale() == 512.0


def test_static_scaler_rejects_non_positive_scale():
    with pytest.raises(ValueError, match="StaticScaler: `scale` must be positive and finite"):
        StaticScaler(scale=0.0)


@pytest.mark.cuda
def test_grad_scaler_matches_torch_on_cuda():
    ours = _run(GradScaler("cuda", growth_interval=3), bad=INJECTED, device="cuda")
    ref = _run(torch.amp.GradScaler("cuda", growth_interval=3), bad=INJECTED, device="cuda")
    assert ours[0] == ref[0]
    for a, b in zip(ours[1], ref[1]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
