"""gradflow_ref.clipping against torch.nn.utils: same results to 1 ulp, stricter input checks;
adam_moments against the steps torch.optim.Adam and AdamW take."""

import copy
import math

import pytest
import torch
from torch.nn import utils as tu

from gradflow_ref.clipping import (
    adam_moments,
    angle_between,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)

NORM_TYPES = [0.0, 0.5, 1.0, 2.0, 3.0, math.inf, "inf"]


def random_grads(gen: torch.Generator, dtype: torch.dtype) -> list[torch.Tensor]:
    """1-5 gradients of random sizes, each with its own scale between 1e-3 and 1e3."""
    n = int(torch.randint(1, 6, (), generator=gen))
    grads = []
    for _ in range(n):
        size = int(torch.randint(1, 65, (), generator=gen))
        scale = 10 ** (float(torch.rand((), generator=gen)) * 6 - 3)
        grads.append((torch.randn(size, generator=gen) * scale).to(dtype))
    return grads


def params_with(grads: list[torch.Tensor | None]) -> list[torch.nn.Parameter]:
    params = []
    for g in grads:
        p = torch.nn.Parameter(torch.zeros(1) if g is None else torch.zeros_like(g))
        p.grad = None if g is None else g.clone()
        params.append(p)
    return params


def assert_ulp_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    # 1 ulp of a value x is at most eps * |x|, so rtol = eps allows one ulp and no more
    eps = torch.finfo(expected.dtype).eps
    torch.testing.assert_close(actual, expected, rtol=eps, atol=0.0, equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_clip_grad_norm_matches_torch(dtype):
    gen = torch.Generator().manual_seed(0)
    for case in range(240):
        grads = random_grads(gen, dtype)
        norm_type = NORM_TYPES[case % len(NORM_TYPES)]
        max_norm = 10 ** (float(torch.rand((), generator=gen)) * 4 - 2)
        foreach = (None, True, False)[case % 3]
        ours, theirs = params_with(grads), params_with(grads)
        total = clip_grad_norm_(ours, max_norm, norm_type, foreach=foreach)
        expected = tu.clip_grad_norm_(theirs, max_norm, norm_type, foreach=foreach)
        assert total.dtype == expected.dtype
        assert_ulp_close(total, expected)
        for p, q in zip(ours, theirs):
            assert_ulp_close(p.grad, q.grad)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_clip_grad_value_matches_torch(dtype):
    gen = torch.Generator().manual_seed(1)
    for case in range(120):
        grads = random_grads(gen, dtype)
        clip_value = 10 ** (float(torch.rand((), generator=gen)) * 4 - 2)
        foreach = (None, True, False)[case % 3]
        ours, theirs = params_with(grads), params_with(grads)
        clip_grad_value_(ours, clip_value, foreach=foreach)
        tu.clip_grad_value_(theirs, clip_value, foreach=foreach)
        for p, q in zip(ours, theirs):
            assert_ulp_close(p.grad, q.grad)


def test_get_total_norm_matches_torch():
    gen = torch.Generator().manual_seed(2)
    for case in range(60):
        grads = random_grads(gen, torch.float32)
        norm_type = NORM_TYPES[case % len(NORM_TYPES)]
        assert_ulp_close(get_total_norm(grads, norm_type), tu.get_total_norm(grads, norm_type))


def test_clip_grads_with_norm_matches_torch():
    gen = torch.Generator().manual_seed(3)
    for _ in range(60):
        grads = random_grads(gen, torch.float32)
        total = torch.linalg.vector_norm(torch.cat(grads))
        ours, theirs = params_with(grads), params_with(grads)
        clip_grads_with_norm_(ours, 0.5, total)
        tu.clip_grads_with_norm_(theirs, 0.5, total)
        for p, q in zip(ours, theirs):
            assert_ulp_close(p.grad, q.grad)


def test_clip_grad_norm_matches_torch_with_mixed_dtypes():
    grads = [
        torch.tensor([3.0, 4.0]),
        torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
        torch.tensor([0.25]),
    ]
    ours, theirs = params_with(grads), params_with(grads)
    assert_ulp_close(clip_grad_norm_(ours, 1.0), tu.clip_grad_norm_(theirs, 1.0))
    for p, q in zip(ours, theirs):
        assert_ulp_close(p.grad, q.grad)


def test_clip_grad_norm_hand_calculation():
    params = params_with([torch.tensor([3.0, 4.0]), torch.tensor([0.0])])
    total = clip_grad_norm_(params, max_norm=1.0)
    torch.testing.assert_close(total, torch.tensor(5.0), rtol=0.0, atol=0.0)
    # 1 / (5 + 1e-6) rather than 1 / 5: the 1e-6 moves the result by ~1e-7
    torch.testing.assert_close(params[0].grad, torch.tensor([0.6, 0.8]), rtol=1e-6, atol=0.0)
    torch.testing.assert_close(params[1].grad, torch.tensor([0.0]), rtol=0.0, atol=0.0)


def test_clip_grad_norm_leaves_grads_below_max_norm_unchanged():
    params = params_with([torch.tensor([3.0, 4.0]), torch.tensor([0.0])])
    assert clip_grad_norm_(params, max_norm=10.0).item() == 5.0
    assert torch.equal(params[0].grad, torch.tensor([3.0, 4.0]))


def test_clip_grad_norm_preserves_direction():
    params = params_with([torch.tensor([3.0, 4.0, -12.0])])
    before = params[0].grad.clone()
    clip_grad_norm_(params, max_norm=1.0)
    assert angle_between(before, params[0].grad) < 1e-3


def test_clip_grad_norm_accepts_a_generator():
    ours = torch.nn.Linear(3, 2)
    theirs = copy.deepcopy(ours)
    for model in (ours, theirs):
        model(torch.ones(4, 3)).sum().backward()
    # the generator is read once for the norm; the scaling pass must still see every parameter
    assert_ulp_close(
        clip_grad_norm_(ours.parameters(), 0.1), tu.clip_grad_norm_(theirs.parameters(), 0.1)
    )
    for p, q in zip(ours.parameters(), theirs.parameters()):
        assert_ulp_close(p.grad, q.grad)
    clipped = get_total_norm([p.grad for p in ours.parameters()]).item()
    assert clipped == pytest.approx(0.1, rel=1e-5)


def test_clip_grad_norm_accepts_a_single_tensor():
    w = torch.zeros(2, requires_grad=True)
    w.grad = torch.tensor([6.0, 8.0])
    assert clip_grad_norm_(w, 5.0).item() == 10.0
    torch.testing.assert_close(w.grad, torch.tensor([3.0, 4.0]), rtol=1e-6, atol=0.0)


def test_clip_grad_norm_skips_params_without_grad():
    params = params_with([torch.tensor([3.0, 4.0]), None])
    assert clip_grad_norm_(params, 1.0).item() == 5.0
    assert params[1].grad is None


def test_clip_grad_norm_returns_zero_without_grads():
    total = clip_grad_norm_(params_with([None, None]), 1.0)
    assert torch.equal(total, torch.tensor(0.0))


def test_clip_grad_norm_warns_on_empty_generator():
    with pytest.warns(UserWarning, match="empty generator"):
        clip_grad_norm_((p for p in []), 1.0)


@pytest.mark.parametrize("max_norm", [-1.0, 0.0, math.nan, math.inf])
def test_clip_grad_norm_rejects_bad_max_norm(max_norm):
    with pytest.raises(ValueError, match="`max_norm` must be positive and finite"):
        clip_grad_norm_(params_with([torch.ones(2)]), max_norm)


@pytest.mark.parametrize("norm_type", ["fro", math.nan, "nan"])
def test_clip_grad_norm_rejects_unknown_norm_type(norm_type):
    with pytest.raises(ValueError, match="`norm_type` must"):
        clip_grad_norm_(params_with([torch.ones(2)]), 1.0, norm_type)


@pytest.mark.parametrize("norm_type", [-0.1, -1.0, -2, -math.inf, "-inf"])
def test_clip_grad_norm_matches_torch_on_negative_norm_type(norm_type):
    grads = [torch.tensor([3.0, -4.0, 0.5]), torch.tensor([1.0, 2.0])]
    ours, theirs = params_with(grads), params_with(grads)
    assert_ulp_close(
        clip_grad_norm_(ours, 0.05, norm_type), tu.clip_grad_norm_(theirs, 0.05, norm_type)
    )
    for a, b in zip(ours, theirs):
        assert_ulp_close(a.grad, b.grad)


def test_clip_grad_norm_rejects_norm_type_of_wrong_type():
    with pytest.raises(TypeError, match="`norm_type` must be a number"):
        clip_grad_norm_(params_with([torch.ones(2)]), 1.0, None)


def test_clip_grad_norm_rejects_non_tensor_parameters():
    with pytest.raises(TypeError, match="`parameters` must"):
        clip_grad_norm_(3.0, 1.0)
    with pytest.raises(TypeError, match="`parameters` must hold only Tensors"):
        clip_grad_norm_([torch.ones(1), "w"], 1.0)


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_clip_grad_norm_raises_on_nonfinite_norm_when_asked(bad):
    params = params_with([torch.tensor([1.0, bad])])
    with pytest.raises(RuntimeError, match="`error_if_nonfinite` is True"):
        clip_grad_norm_(params, 1.0, error_if_nonfinite=True)
    assert params[0].grad[0].item() == 1.0  # raised before touching the gradients


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_clip_grad_norm_matches_torch_on_nonfinite_norm_by_default(bad):
    grads = [torch.tensor([1.0, bad]), torch.tensor([2.0])]
    ours, theirs = params_with(grads), params_with(grads)
    assert_ulp_close(clip_grad_norm_(ours, 1.0), tu.clip_grad_norm_(theirs, 1.0))
    for p, q in zip(ours, theirs):
        assert_ulp_close(p.grad, q.grad)


def test_clip_grad_norm_foreach_rejects_device_without_foreach_kernels():
    w = torch.zeros(2, device="meta", requires_grad=True)
    w.grad = torch.ones(2, device="meta")
    with pytest.raises(RuntimeError, match="`foreach=True` needs a device"):
        clip_grad_norm_(w, 1.0, foreach=True)


@pytest.mark.parametrize("clip_value", [-0.5, 0.0, math.nan, math.inf])
def test_clip_grad_value_rejects_bad_clip_value(clip_value):
    with pytest.raises(ValueError, match="`clip_value` must be positive and finite"):
        clip_grad_value_(params_with([torch.ones(2)]), clip_value)


def test_clip_grad_value_accepts_a_generator():
    params = params_with([torch.tensor([3.0, -4.0]), torch.tensor([0.5])])
    clip_grad_value_((p for p in params), 1.0)
    assert torch.equal(params[0].grad, torch.tensor([1.0, -1.0]))
    assert torch.equal(params[1].grad, torch.tensor([0.5]))


def test_clip_grad_value_changes_direction():
    params = params_with([torch.tensor([3.0, 0.5])])
    clip_grad_value_(params, 1.0)
    expected = math.degrees(math.atan2(0.5, 1.0) - math.atan2(0.5, 3.0))  # 17.1 degrees
    assert angle_between(torch.tensor([3.0, 0.5]), params[0].grad) == pytest.approx(expected)


def test_angle_between_is_ninety_for_orthogonal_vectors():
    assert angle_between(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 2.0])) == 90.0


def test_angle_between_rejects_zero_vector():
    with pytest.raises(ValueError, match="must be non-zero"):
        angle_between(torch.tensor([1.0, 0.0]), torch.zeros(2))


def adam_steps(opt_class, steps=5, **kwargs):
    """Take `steps` steps of `opt_class` on random float64 gradients; return the last step's
    weights before and after, the optimizer and its parameters."""
    gen = torch.Generator().manual_seed(5)
    params = [
        torch.nn.Parameter(torch.randn(s, generator=gen, dtype=torch.float64)) for s in (7, 3)
    ]
    opt = opt_class(params, lr=0.01, betas=(0.9, 0.95), **kwargs)
    for _ in range(steps):
        for p in params:
            p.grad = torch.randn(p.shape, generator=gen, dtype=torch.float64) * 10
        before = [p.detach().clone() for p in params]
        opt.step()
    return before, [p.detach().clone() for p in params], opt


@pytest.mark.parametrize("opt_class", [torch.optim.Adam, torch.optim.AdamW])
@pytest.mark.parametrize("amsgrad", [False, True])
def test_adam_moments_reproduce_the_step_torch_took(opt_class, amsgrad):
    before, after, opt = adam_steps(opt_class, amsgrad=amsgrad, weight_decay=0.0)
    m_hat, v_hat = adam_moments(opt)
    step = 0.01 * m_hat / (v_hat.sqrt() + 1e-8)
    moved = torch.cat([(b - a).flatten() for b, a in zip(before, after)])
    # float64 throughout; torch divides sqrt(v) by sqrt(1 - beta2**t), here v first: a few ulp
    torch.testing.assert_close(step, moved, rtol=1e-12, atol=1e-15)


def test_adam_moments_reproduce_the_adamw_step_with_weight_decay():
    before, after, opt = adam_steps(torch.optim.AdamW, weight_decay=0.1)
    m_hat, v_hat = adam_moments(opt)
    start = torch.cat([b.flatten() for b in before])
    decay = 0.01 * 0.1 * start
    step = 0.01 * m_hat / (v_hat.sqrt() + 1e-8)
    moved = start - torch.cat([a.flatten() for a in after])
    torch.testing.assert_close(decay + step, moved, rtol=1e-12, atol=1e-15)


def test_adam_moments_skip_parameters_without_state():
    used, unused = torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(5))
    opt = torch.optim.AdamW([used, unused])
    used.grad = torch.ones(3)
    opt.step()
    m_hat, v_hat = adam_moments(opt)
    assert m_hat.shape == v_hat.shape == (3,)


def test_adam_moments_reject_an_optimizer_without_adam_state():
    w = torch.nn.Parameter(torch.zeros(2))
    with pytest.raises(ValueError, match="holds no Adam state"):
        adam_moments(torch.optim.AdamW([w]))  # no step taken yet
    sgd = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    w.grad = torch.ones(2)
    sgd.step()
    with pytest.raises(ValueError, match="holds no Adam state"):
        adam_moments(sgd)


def test_adam_moments_reject_what_is_not_an_optimizer():
    with pytest.raises(TypeError, match="`optimizer` must be a torch.optim.Optimizer"):
        adam_moments({"exp_avg": torch.zeros(2)})


@pytest.mark.cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_clip_grad_norm_matches_torch_on_cuda(dtype):
    gen = torch.Generator().manual_seed(4)
    for case in range(60):
        grads = [g.cuda() for g in random_grads(gen, dtype)]
        norm_type = NORM_TYPES[case % len(NORM_TYPES)]
        ours, theirs = params_with(grads), params_with(grads)
        assert_ulp_close(
            clip_grad_norm_(ours, 0.7, norm_type), tu.clip_grad_norm_(theirs, 0.7, norm_type)
        )
        for p, q in zip(ours, theirs):
            assert_ulp_close(p.grad, q.grad)
