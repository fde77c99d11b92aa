"""gradflow_ref held against PyTorch's own tests for the same functions (held-out checks).

The clipping tests are adapted from PyTorch's test/nn/test_clip_grad.py (formerly test_nn.py:
test_clip_grad_norm, test_clip_grad_value, test_clip_grad_norm_error_if_nonfinite) and the
scaler tests from test_torch.py / test_cuda.py (test_grad_scaling_state_dict, the
_run_scaling_case training comparison, test_grad_scaling_clipping, test_grad_scaling_penalty,
test_grad_scaling_update_scale), run on the CPU with gradflow_ref in place of torch and, where
torch's test compared against hand-computed values, against torch's own result as well.
"""

import inspect
import math
from itertools import product

import pytest
import torch
from torch import nn
from torch.nn import utils as tu

from gradflow_ref.clipping import clip_grad_norm_, clip_grad_value_, get_total_norm
from gradflow_ref.loss_scaling import GradScaler

inf, nan = math.inf, math.nan
# torch's list (0.5, 1.5, 2, 4, 'inf') plus the negative orders and -inf torch also accepts
NORM_TYPES = (0.5, 1.5, 2, 4, "inf", -0.5, -2, -inf)


def compute_norm(params, norm_type) -> torch.Tensor:
    """Torch test's reference: (sum |g|^p)^(1/p) by hand, max |g| for inf (min |g| for -inf)."""
    p = float(norm_type)
    grads = [q.grad.detach().abs().reshape(-1) for q in params]
    if p == inf:
        return torch.cat(grads).max()
    if p == -inf:
        return torch.cat(grads).min()
    return sum(g.pow(p).sum() for g in grads) ** (1.0 / p)


def set_grads(params, grads) -> None:
    for p, g in zip(params, grads):
        p.grad = None if g is None else g.clone().view_as(p)


def uniform_scale(params, grads) -> torch.Tensor:
    """Every gradient scaled by the same factor (torch's compare_scaling); return it."""
    scale = torch.cat([p.grad.div(g).reshape(-1) for p, g in zip(params, grads)])
    torch.testing.assert_close(scale.std(), torch.tensor(0.0), atol=1e-6, rtol=0)
    return scale[0]


@pytest.mark.parametrize("foreach", [False, True])
@pytest.mark.parametrize("norm_type", NORM_TYPES)
def test_clip_grad_norm_torch_suite(norm_type, foreach):
    torch.manual_seed(0)
    layer = nn.Linear(10, 10)
    grads = torch.arange(1.0, 101).view(10, 10), torch.ones(10).div(1000)
    set_grads(layer.parameters(), grads)
    before = compute_norm(layer.parameters(), norm_type)
    # torch uses max_norm 2 (below every positive-order norm here); a negative order gives a
    # generalised mean below 2, so there max_norm is a quarter of the norm, to clip as well
    max_norm = min(2.0, float(before) / 4)
    norm = clip_grad_norm_(layer.parameters(), max_norm, norm_type=norm_type, foreach=foreach)
    after = compute_norm(layer.parameters(), norm_type)
    torch.testing.assert_close(norm, before, rtol=1e-5, atol=0)
    # torch asserts after == max_norm; exactly, clipping divides by (norm + 1e-6)
    expected = max_norm * before / (before + 1e-6)
    torch.testing.assert_close(after, expected, rtol=1e-5, atol=0)
    assert after <= before
    uniform_scale(layer.parameters(), grads)

    # small gradients are left unchanged
    grads = torch.rand(10, 10).div(10000), torch.ones(10).div(500)
    set_grads(layer.parameters(), grads)
    before = compute_norm(layer.parameters(), norm_type)
    max_norm = max(2.0, float(before) * 4)
    norm = clip_grad_norm_(layer.parameters(), max_norm, norm_type=norm_type, foreach=foreach)
    torch.testing.assert_close(norm, before, rtol=1e-5, atol=0)
    assert uniform_scale(layer.parameters(), grads) == 1

    # a single Tensor is accepted as input
    p1, p2 = torch.randn(10, 10), torch.randn(10, 10)
    p1.grad = torch.arange(1.0, 101).view(10, 10)
    p2.grad = p1.grad.clone()
    clip_grad_norm_(p1, max_norm, norm_type=norm_type, foreach=foreach)
    clip_grad_norm_([p2], max_norm, norm_type=norm_type, foreach=foreach)
    torch.testing.assert_close(p1.grad, p2.grad, rtol=0, atol=0)


@pytest.mark.parametrize("norm_type", NORM_TYPES)
def test_clip_grad_norm_warns_like_torch_on_exhausted_generator(norm_type):
    layer = nn.Linear(3, 3)
    params = layer.parameters()
    for _ in params:
        pass
    with pytest.warns(UserWarning, match="is an empty generator, no gradient clipping"):
        clip_grad_norm_(params, 1.0, norm_type=norm_type)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("norm_type", [-0.1, -1.0, -2, -3.5, -inf, "-inf", "inf", "2", 0, 0.1, 3.5])
def test_clip_grad_norm_matches_torch_for_every_norm_type(norm_type, dtype):
    gen = torch.Generator().manual_seed(7)
    grads = [torch.randn(n, generator=gen).to(dtype) * s for n, s in ((5, 1e-2), (7, 3.0), (1, 40))]
    ours, theirs = [], []
    for g in grads:
        for group in (ours, theirs):
            p = torch.zeros_like(g, requires_grad=True)
            p.grad = g.clone()
            group.append(p)
    eps = torch.finfo(dtype).eps
    total = clip_grad_norm_(ours, 0.3, norm_type)
    expected = tu.clip_grad_norm_(theirs, 0.3, norm_type)
    torch.testing.assert_close(total, expected, rtol=eps, atol=0)
    for a, b in zip(ours, theirs):
        torch.testing.assert_close(a.grad, b.grad, rtol=eps, atol=0)
    torch.testing.assert_close(
        get_total_norm(grads, norm_type), tu.get_total_norm(grads, norm_type)
    )


def test_clip_grad_norm_accepts_a_tensor_norm_type_like_torch():
    g = torch.tensor([3.0, 4.0])
    torch.testing.assert_close(
        get_total_norm([g], torch.tensor(3.0)), tu.get_total_norm([g], torch.tensor(3.0))
    )


@pytest.mark.parametrize("foreach", [False, True])
def test_clip_grad_value_torch_suite(foreach):
    layer, clip_value = nn.Linear(10, 10), 2.5
    grad_w, grad_b = torch.arange(-50.0, 50).view(10, 10).div_(5), torch.ones(10).mul_(2)
    for grad_list in ([grad_w, grad_b], [grad_w, None]):
        set_grads(layer.parameters(), grad_list)
        clip_grad_value_(layer.parameters(), clip_value, foreach=foreach)
        for p in (p for p in layer.parameters() if p.grad is not None):
            assert p.grad.max() <= clip_value
            assert p.grad.min() >= -clip_value

    p1, p2 = torch.randn(10, 10), torch.randn(10, 10)
    p1.grad = torch.arange(-50.0, 50).view(10, 10).div_(5)
    p2.grad = p1.grad.clone()
    clip_grad_value_(p1, clip_value, foreach=foreach)
    clip_grad_value_([p2], clip_value, foreach=foreach)
    torch.testing.assert_close(p1.grad, p2.grad, rtol=0, atol=0)


def test_clip_grad_value_raises_like_torch_without_gradients():
    params = [nn.Parameter(torch.zeros(3))]
    with pytest.raises(RuntimeError):
        tu.clip_grad_value_(params, 1.0)
    with pytest.raises(RuntimeError, match="no gradient to clip"):
        clip_grad_value_(params, 1.0)


# torch's test_clip_grad_norm_error_if_nonfinite table: (grad_only_one_elem,
# prefix_finite_grad_param, scalars, norms giving a non-finite total, norms giving a finite one)
NORMS_POS = [0.1, 1, 2, 3.5, inf]
NORMS_NEG = [-0.1, -1, -2, -3.5]
NORMS_EXCEPT_0 = NORMS_POS + NORMS_NEG
NORMS_ALL = NORMS_EXCEPT_0 + [0]
NONFINITE_CASES = [
    (False, False, [inf, -inf], NORMS_EXCEPT_0, [0]),
    (False, True, [inf, -inf], NORMS_POS, NORMS_NEG + [0]),
    (True, False, [inf, -inf], NORMS_POS, NORMS_NEG + [0]),
    (True, True, [inf, -inf], NORMS_POS, NORMS_NEG + [0]),
    (False, False, [nan], NORMS_EXCEPT_0, [0]),
    (False, True, [nan], NORMS_EXCEPT_0, [0]),
    (True, False, [nan], NORMS_EXCEPT_0, [0]),
    (True, True, [nan], NORMS_EXCEPT_0, [0]),
    (False, False, [2e22, -2e22], [], NORMS_ALL),
    (False, True, [2e22, -2e22], [], NORMS_ALL),
    (True, False, [2e22, -2e22], [], NORMS_ALL),
    (True, True, [2e22, -2e22], [], NORMS_ALL),
    (False, False, [2e200, -2e200], [3.5, 2, -2, -3.5], [inf, 1, 0.1, 0, -1, -0.1]),
    (False, True, [2e200, -2e200], [3.5, 2], NORMS_NEG + [inf, 1, 0.1, 0]),
    (True, False, [2e200, -2e200], [3.5, 2], NORMS_NEG + [inf, 1, 0.1, 0]),
    (True, True, [2e200, -2e200], [3.5, 2], NORMS_NEG + [inf, 1, 0.1, 0]),
]


def _nonfinite_params(scalar, grad_only_one_elem, prefix_finite_grad_param):
    param = torch.ones(10, dtype=torch.float64, requires_grad=True)
    (param[1] if grad_only_one_elem else param).mul(scalar).sum().backward()
    if not prefix_finite_grad_param:
        return [param]
    prefix = torch.ones(1, dtype=torch.float64, requires_grad=True)
    prefix.mul(1).sum().backward()
    return [prefix, param]


@pytest.mark.parametrize("case", range(len(NONFINITE_CASES)))
def test_clip_grad_norm_error_if_nonfinite_torch_suite(case):
    one_elem, prefix, scalars, norms_nonfinite, norms_finite = NONFINITE_CASES[case]
    runs = [(n, True) for n in norms_nonfinite] + [(n, False) for n in norms_finite]
    for (norm_type, nonfinite), scalar, error in product(runs, scalars, [False, True]):
        params = _nonfinite_params(scalar, one_elem, prefix)
        if nonfinite and error:
            before = [p.grad.clone() for p in params]
            with pytest.raises(RuntimeError, match=rf"order {float(norm_type)}\) is"):
                clip_grad_norm_(params, 1, norm_type=norm_type, error_if_nonfinite=True)
            for p, g in zip(params, before):  # no gradient changes when it raises
                torch.testing.assert_close(p.grad, g, rtol=0, atol=0, equal_nan=True)
        else:
            clip_grad_norm_(params, 1, norm_type=norm_type, error_if_nonfinite=error)


# ---- GradScaler ---------------------------------------------------------------------------


def _public(cls) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def test_grad_scaler_offers_every_public_name_of_torch():
    # fails when torch adds a public method or property that gradflow_ref lacks
    missing = _public(torch.amp.GradScaler) - _public(GradScaler)
    assert not missing, f"gradflow_ref.GradScaler lacks torch's {sorted(missing)}"


def test_grad_scaler_signatures_match_torch():
    for name in sorted(_public(torch.amp.GradScaler)):
        theirs = getattr(torch.amp.GradScaler, name)
        if callable(theirs):
            params = list(inspect.signature(theirs).parameters)
            assert list(inspect.signature(getattr(GradScaler, name)).parameters) == params, name
    ctor = [p for p in inspect.signature(torch.amp.GradScaler.__init__).parameters]
    assert list(inspect.signature(GradScaler.__init__).parameters) == ctor


@pytest.mark.parametrize("lazy_init_scale", [True, False])
@pytest.mark.parametrize(
    "src, dst", [(GradScaler, torch.amp.GradScaler), (torch.amp.GradScaler, GradScaler)]
)
def test_grad_scaler_state_dict_torch_suite(src, dst, lazy_init_scale):
    s0 = src("cpu", init_scale=3.0, growth_factor=4.0, backoff_factor=0.5, growth_interval=2)
    s1 = dst("cpu", init_scale=6.0, growth_factor=7.0, backoff_factor=0.8, growth_interval=1)
    if lazy_init_scale:
        s1.scale(torch.full((1,), 4.0))
    s1.load_state_dict(s0.state_dict())
    assert s1.get_scale() == 3.0
    assert s1.get_growth_factor() == 4.0
    assert s1.get_backoff_factor() == 0.5
    assert s1.get_growth_interval() == 2
    assert s1.state_dict()["_growth_tracker"] == 0


@pytest.mark.parametrize(
    "src, dst", [(GradScaler, torch.amp.GradScaler), (torch.amp.GradScaler, GradScaler)]
)
def test_grad_scaler_state_dict_round_trip_mid_training(src, dst):
    a = src("cpu", init_scale=8.0, growth_interval=3)
    model, opt, data, loss_fn = _scaling_case()
    for x, y in data[:2]:  # two clean steps: the growth tracker is 2
        a.scale(loss_fn(model(x), y)).backward()
        a.step(opt)
        a.update()
        opt.zero_grad()
    b = dst("cpu")
    b.load_state_dict(a.state_dict())
    assert b.state_dict() == a.state_dict()
    assert a.state_dict()["_growth_tracker"] == 2
    x, y = data[2]  # the third clean step grows the scale in both
    for s in (a, b):
        s.scale(loss_fn(model(x), y)).backward()
        s.step(opt)
        s.update()
        opt.zero_grad()
    assert a.get_scale() == b.get_scale() == 16.0


def _scaling_case(seed=0):
    """torch's _create_scaling_case on the CPU: two Linear(8, 8), SGD lr 1, four batches."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8))
    data = [(torch.randn(8, 8), torch.randn(8, 8)) for _ in range(4)]
    return model, torch.optim.SGD(model.parameters(), lr=1.0), data, nn.MSELoss()


def _run_scaling_case(scaler_cls, run, **kwargs):
    """Train the case with `run(data, model, optimizer, scaler, loss_fn)`; return the result."""
    model, optimizer, data, loss_fn = _scaling_case()
    scaler = scaler_cls("cpu", init_scale=128.0, growth_factor=2.0, growth_interval=1, **kwargs)
    run(data, model, optimizer, scaler, loss_fn)
    return scaler.get_scale(), scaler.state_dict(), [p.detach().clone() for p in model.parameters()]


def _compare_with_torch(run, **kwargs):
    ours = _run_scaling_case(GradScaler, run, **kwargs)
    theirs = _run_scaling_case(torch.amp.GradScaler, run, **kwargs)
    assert ours[0] == theirs[0]
    assert ours[1] == theirs[1]
    for a, b in zip(ours[2], theirs[2]):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    return ours


SKIP_ITER = 2  # torch's scaling case injects an inf gradient at this iteration


def _run_plain(data, model, optimizer, scaler, loss_fn):
    for i, (x, y) in enumerate(data):
        optimizer.zero_grad()
        scaler.scale(loss_fn(model(x), y)).backward()
        if i == SKIP_ITER and scaler.is_enabled():
            model[1].weight.grad.data.fill_(inf)
        scaler.step(optimizer)
        scaler.update()


def _run_clipping(data, model, optimizer, scaler, loss_fn):
    for i, (x, y) in enumerate(data):
        optimizer.zero_grad()
        scaler.scale(loss_fn(model(x), y)).backward()
        scaler.unscale_(optimizer)
        clip_grad_norm_(model.parameters(), 0.2)
        if i == SKIP_ITER and scaler.is_enabled():
            model[1].weight.grad.data.fill_(inf)
        scaler.step(optimizer)
        scaler.update()


def _run_penalty(data, model, optimizer, scaler, loss_fn):
    for i, (x, y) in enumerate(data):
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        grads = torch.autograd.grad(scaler.scale(loss), model.parameters(), create_graph=True)
        inv_scale = 1.0 / scaler.get_scale()
        penalty = sum((g * inv_scale).pow(2).sum() for g in grads).sqrt()
        (scaler.scale(loss + penalty)).backward()
        if i == SKIP_ITER and scaler.is_enabled():
            model[1].weight.grad.data.fill_(inf)
        scaler.step(optimizer)
        scaler.update()


def _run_accumulation(data, model, optimizer, scaler, loss_fn):
    for i, (x, y) in enumerate(data):
        scaler.scale(loss_fn(model(x), y) / 2).backward()
        if i % 2 == 1:
            if i == 3 and scaler.is_enabled():
                model[1].weight.grad.data.fill_(inf)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize(
    "run", [_run_plain, _run_clipping, _run_penalty, _run_accumulation], ids=lambda f: f.__name__
)
def test_grad_scaler_training_matches_torch(run, enabled):
    scale, _, _ = _compare_with_torch(run, enabled=enabled)
    # torch's expectation: one skipped step backs off once, every clean step grows (interval 1)
    expected = 128.0 if run is _run_accumulation else 128.0 * 2**3 * 0.5
    assert scale == (expected if enabled else 1.0)


def test_grad_scaler_setters_act_like_torch_mid_training():
    def run(data, model, optimizer, scaler, loss_fn):
        for i, (x, y) in enumerate(data * 3):
            optimizer.zero_grad()
            scaler.scale(loss_fn(model(x), y)).backward()
            if i in (4, 9):
                model[0].bias.grad.data.fill_(nan)
            scaler.step(optimizer)
            scaler.update()
            if i == 2:
                scaler.set_growth_factor(3.0)
                scaler.set_backoff_factor(0.25)
            if i == 6:
                scaler.set_growth_interval(2)

    _, state, _ = _compare_with_torch(run)
    assert (state["growth_factor"], state["backoff_factor"], state["growth_interval"]) == (
        3.0,
        0.25,
        2,
    )


@pytest.mark.parametrize("cls", [GradScaler, torch.amp.GradScaler])
def test_grad_scaler_getters_read_the_constructor(cls):
    s = cls("cpu", init_scale=4.0, growth_factor=3.0, backoff_factor=0.25, growth_interval=7)
    assert (s.get_growth_factor(), s.get_backoff_factor(), s.get_growth_interval()) == (
        3.0,
        0.25,
        7,
    )
    assert s.get_scale() == 4.0 and s.is_enabled()


def test_grad_scaler_update_scale_sequence_matches_torch_amp_update_scale():
    # torch's test_grad_scaling_update_scale, through the public API: growth, then a skip
    for found in ([0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0]):
        scales = []
        for cls in (GradScaler, torch.amp.GradScaler):
            s, p = (
                cls(
                    "cpu", init_scale=2.0, growth_factor=4.0, backoff_factor=0.5, growth_interval=2
                ),
                nn.Parameter(torch.ones(2)),
            )
            opt, history = torch.optim.SGD([p], lr=0.0), []
            for bad in found:
                s.scale(p.sum()).backward()
                if bad:
                    p.grad.fill_(inf)
                s.step(opt)
                s.update()
                p.grad = None
                history.append((s.get_scale(), s.state_dict()["_growth_tracker"]))
            scales.append(history)
        assert scales[0] == scales[1]


@pytest.mark.parametrize("cls", [GradScaler, torch.amp.GradScaler])
def test_grad_scaler_step_without_gradients_raises_no_inf_checks(cls):
    p, q = nn.Parameter(torch.ones(2)), nn.Parameter(torch.ones(2))
    s = cls("cpu")
    s.scale(p.sum()).backward()
    with pytest.raises((RuntimeError, AssertionError), match="No inf checks were recorded"):
        s.step(torch.optim.SGD([q], lr=0.1))


@pytest.mark.parametrize("cls", [GradScaler, torch.amp.GradScaler])
def test_grad_scaler_update_with_new_scale_like_torch(cls):
    s, p = cls("cpu", init_scale=8.0), nn.Parameter(torch.ones(2))
    s.scale(p.sum()).backward()
    s.update(new_scale=2.0)
    assert s.get_scale() == 2.0
    s.scale(p.sum()).backward()
    s.update(new_scale=torch.tensor(0.5))
    assert s.get_scale() == 0.5


@pytest.mark.parametrize("cls", [GradScaler, torch.amp.GradScaler])
def test_grad_scaler_scale_keeps_nested_structure_like_torch(cls):
    # torch's test_grad_scaling_scale on one device: nested lists and tuples are scaled in place
    t = torch.full((1,), 4.0)
    outputs = cls("cpu", init_scale=2.0).scale((t.clone(), (t.clone(), t.clone()), [t.clone()]))
    assert isinstance(outputs, tuple) and isinstance(outputs[1], tuple)
    assert isinstance(outputs[2], list)
    assert all(float(o) == 8.0 for o in (outputs[0], *outputs[1], *outputs[2]))


@pytest.mark.parametrize("cls", [GradScaler, torch.amp.GradScaler])
def test_grad_scaler_disabled_is_a_pass_through_like_torch(cls):
    s = cls("cpu", enabled=False)
    t = torch.ones(2)
    assert s.scale(t) is t
    assert s.state_dict() == {} and s.get_scale() == 1.0 and not s.is_enabled()
