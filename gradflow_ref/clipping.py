"""Gradient clipping: cap the global gradient norm (or each element) before the optimizer step.

Taught in docs/clipping.md. Norm clipping follows Pascanu, Mikolov and Bengio, "On the difficulty
of training recurrent neural networks" (ICML 2013). Same names, signatures and results as
`torch.nn.utils` (`clip_grad_norm_`, `clip_grad_value_`, `get_total_norm`, `clip_grads_with_norm_`),
with stricter input checks; `adam_moments` reads what a gradient left in Adam's state.
"""

import math
import numbers
import types
import warnings
from collections.abc import Iterable

import torch

from gradflow_ref import _checks

__all__ = [
    "get_total_norm",
    "clip_grads_with_norm_",
    "clip_grad_norm_",
    "clip_grad_value_",
    "angle_between",
    "adam_moments",
]

# Device types with fused foreach kernels (torch: the foreach-kernel devices plus the CPU).
_FOREACH_DEVICES = ("cpu", "cuda", "xpu", "mtia")


_MAX_NORM_FIX = "pass the largest total gradient norm to let through, e.g. 1.0."
_CLIP_VALUE_FIX = "pass the largest absolute gradient element to let through, e.g. 1.0."


@torch.no_grad()
def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None) -> torch.Tensor:
    """Return the p-norm of all `tensors` viewed as one vector (the norm of their norms).

    Args:
        tensors: a Tensor or an iterable of Tensors (usually gradients).
        norm_type: the order p (any float but nan, as torch), or 'inf' for the max-norm.
        error_if_nonfinite: raise if the total norm is nan or inf.
        foreach: use torch's fused foreach kernels; None picks them where the device has them.

    Returns:
        A 0-dim tensor on the first tensor's device; tensor(0.) when there are no tensors.

    Raises:
        TypeError: `tensors` is not a Tensor or an iterable of Tensors.
        ValueError: `norm_type` is nan or a string that is not a number.
        RuntimeError: the total norm is non-finite and `error_if_nonfinite` is True.
    """
    func = "get_total_norm"
    tensors = _as_list(tensors, func, "tensors")
    _options(func, foreach, error_if_nonfinite)
    return _total_norm(tensors, _norm_type(norm_type, func), error_if_nonfinite, foreach, func)


def _total_norm(
    tensors: list[torch.Tensor], p: float, error_if_nonfinite: bool, foreach, func: str
) -> torch.Tensor:
    if not tensors:
        return torch.tensor(0.0)
    norms: list[torch.Tensor] = []
    for (device, _), group in _groups(tensors).items():
        if _use_foreach(group, device, foreach, func):
            norms.extend(torch._foreach_norm(group, p))
        else:
            norms.extend(torch.linalg.vector_norm(t, p) for t in group)
    first_device = tensors[0].device
    total = torch.linalg.vector_norm(torch.stack([n.to(first_device) for n in norms]), p)
    if error_if_nonfinite and not torch.isfinite(total):
        raise RuntimeError(
            f"{func}: the total gradient norm (order {p}) is {total.item()} and "
            "`error_if_nonfinite` is True, so the gradients cannot be clipped; "
            "find the step that produced nan/inf, or pass "
            "error_if_nonfinite=False to scale by it anyway."
        )
    return total


def _total_norm_arg(func: str, total_norm) -> torch.Tensor:
    fix = "Pass what get_total_norm returned."
    _checks.instance(func, "total_norm", total_norm, torch.Tensor, fix)
    if total_norm.numel() != 1 or not total_norm.is_floating_point():
        raise ValueError(
            f"{func}: `total_norm` must be a one-element floating tensor, got "
            f"{total_norm.dtype} of shape {tuple(total_norm.shape)}. {fix}"
        )
    return total_norm  # its value stays on its device: reading it would sync, as torch avoids


@torch.no_grad()
def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None) -> None:
    """Scale every `.grad` in place by min(1, max_norm / (total_norm + 1e-6)).

    Args:
        parameters: a Tensor or an iterable of Tensors; those whose `.grad` is None are skipped.
        max_norm: the largest total norm let through; positive and finite.
        total_norm: the precomputed total norm (a 0-dim tensor), e.g. from get_total_norm.
        foreach: use torch's fused foreach kernels; None picks them where the device has them.

    Raises:
        TypeError: `parameters` is not a Tensor or an iterable of Tensors.
        ValueError: `max_norm` is not positive and finite.
    """
    func = "clip_grads_with_norm_"
    parameters = _as_list(parameters, func, "parameters")
    max_norm = _positive_finite(max_norm, func, "max_norm", _MAX_NORM_FIX)
    _options(func, foreach)
    total_norm = _total_norm_arg(func, total_norm)
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return
    # 1e-6 keeps a zero norm finite; the clamp means clipping never scales gradients up. Both
    # stay tensors, so there is no host sync and no branch on the device's value.
    clip_coef = torch.clamp(max_norm / (total_norm + 1e-6), max=1.0)
    for (device, _), group in _groups(grads).items():
        coef = clip_coef.to(device)
        if _use_foreach(group, device, foreach, func):
            torch._foreach_mul_(group, coef)
        else:
            for g in group:
                g.mul_(coef)


@torch.no_grad()
def clip_grad_norm_(
    parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None
) -> torch.Tensor:
    """Clip the global gradient norm of `parameters` to `max_norm`, in place.

    The norm is taken over all gradients at once, as if concatenated into one vector, so every
    gradient is scaled by the same factor and the update keeps its direction.

    Args:
        parameters: a Tensor or an iterable of Tensors (a generator is fine: it is read once);
            those whose `.grad` is None are skipped.
        max_norm: the largest total norm let through; positive and finite.
        norm_type: the order p (any float but nan, as torch), or 'inf' for the max-norm.
        error_if_nonfinite: raise instead of clipping when the total norm is nan or inf.
        foreach: use torch's fused foreach kernels; None picks them where the device has them.

    Returns:
        The total norm before clipping (0-dim tensor), as torch.nn.utils.clip_grad_norm_ does.

    Raises:
        TypeError: `parameters` is not a Tensor or an iterable of Tensors.
        ValueError: `max_norm` is not positive and finite, or `norm_type` is nan.
        RuntimeError: the total norm is non-finite and `error_if_nonfinite` is True.

    Example:
        >>> w = torch.zeros(2, requires_grad=True)
        >>> w.grad = torch.tensor([3.0, 4.0])
        >>> clip_grad_norm_([w], max_norm=1.0)
        tensor(5.)
        >>> w.grad
        tensor([0.6000, 0.8000])
    """
    func = "clip_grad_norm_"
    parameters = _as_list(parameters, func, "parameters")
    max_norm = _positive_finite(max_norm, func, "max_norm", _MAX_NORM_FIX)
    order = _norm_type(norm_type, func)
    _options(func, foreach, error_if_nonfinite)
    grads = [p.grad for p in parameters if p.grad is not None]
    total_norm = _total_norm(grads, order, error_if_nonfinite, foreach, func)
    clip_grads_with_norm_(parameters, max_norm, total_norm, foreach)
    return total_norm


@torch.no_grad()
def clip_grad_value_(parameters, clip_value, foreach=None) -> None:
    """Clamp every gradient element to [-clip_value, clip_value], in place.

    Unlike clip_grad_norm_, each element is cut on its own, so the direction can change.

    Args:
        parameters: a Tensor or an iterable of Tensors; those whose `.grad` is None are skipped.
        clip_value: the largest absolute value let through; positive and finite.
        foreach: use torch's fused foreach kernels; None picks them where the device has them.

    Raises:
        TypeError: `parameters` is not a Tensor or an iterable of Tensors.
        ValueError: `clip_value` is not positive and finite.
        RuntimeError: no parameter has a gradient (torch raises too).
    """
    func = "clip_grad_value_"
    parameters = _as_list(parameters, func, "parameters")
    clip_value = _positive_finite(clip_value, func, "clip_value", _CLIP_VALUE_FIX)
    _options(func, foreach)
    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:  # torch raises here too (from its foreach kernel, without saying why)
        raise RuntimeError(
            f"{func}: no gradient to clip: `parameters` is empty or every .grad is None "
            f"({len(parameters)} parameters); call loss.backward() before clipping."
        )
    for (device, _), group in _groups(grads).items():
        if _use_foreach(group, device, foreach, func):
            torch._foreach_clamp_min_(group, -clip_value)
            torch._foreach_clamp_max_(group, clip_value)
        else:
            for g in group:
                g.clamp_(min=-clip_value, max=clip_value)


@torch.no_grad()
def angle_between(u: torch.Tensor, v: torch.Tensor) -> float:
    """Return the angle in degrees between `u` and `v`, each flattened to one vector.

    Args:
        u: a tensor, e.g. the gradient before clipping.
        v: a tensor with as many elements, e.g. the gradient after clipping.

    Returns:
        The angle in [0, 180], computed in float64.

    Raises:
        TypeError: `u` or `v` is not a tensor.
        ValueError: the sizes differ, either vector is zero (no direction) or holds nan/inf.

    Example:
        >>> angle_between(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 2.0]))
        90.0
    """
    for name, t in (("u", u), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"angle_between: `{name}` must be a tensor, got {type(t).__name__}.")
        if t.is_complex() or t.dtype == torch.bool:
            raise TypeError(
                f"angle_between: `{name}` must be a real tensor, got {t.dtype}; an angle "
                "between complex or boolean vectors is not what this measures."
            )
        if t.is_floating_point() and not torch.isfinite(t).all():
            raise ValueError(
                f"angle_between: `{name}` holds nan or inf, which has no direction; "
                "pass finite gradients (check the step with torch.isfinite first)."
            )
    u, v = u.detach().reshape(-1).double(), v.detach().reshape(-1).double()
    if u.numel() != v.numel():
        raise ValueError(
            f"angle_between: `u` and `v` must have as many elements, "
            f"got {u.numel()} and {v.numel()}."
        )
    su, sv = u.abs().max() if u.numel() else 0, v.abs().max() if v.numel() else 0
    if su == 0 or sv == 0:
        raise ValueError(
            f"angle_between: `u` and `v` must be non-zero, got a zero vector "
            f"(`{'u' if su == 0 else 'v'}`, {u.numel() if su == 0 else v.numel()} elements); "
            "a zero vector has no direction."
        )
    # scaled to a largest element of 1 first: the norm of [1e300, 1e300] would overflow to inf
    # and that of [1e-200, 1e-200] underflow to 0, though the direction is exact in float64
    u, v = u / su, v / sv
    nu, nv = torch.linalg.vector_norm(u), torch.linalg.vector_norm(v)
    cos = torch.clamp(torch.dot(u, v) / (nu * nv), -1.0, 1.0)
    return math.degrees(math.acos(cos.item()))


@torch.no_grad()
def adam_moments(optimizer: torch.optim.Optimizer) -> tuple[torch.Tensor, torch.Tensor]:
    """Return Adam's bias-corrected moments m_hat and v_hat, each as one flat vector.

    For torch.optim.Adam and AdamW, the step a parameter takes (weight decay aside) is
    lr * m_hat / (sqrt(v_hat) + eps), element by element, with m_hat = exp_avg / (1 - beta1**t)
    and v_hat = exp_avg_sq / (1 - beta2**t) (max_exp_avg_sq with amsgrad). Parameters are taken
    in the order of the optimizer's param groups; those without state yet are skipped.

    Args:
        optimizer: a torch.optim.Adam or AdamW (or any optimizer with the same state keys)
            that has taken at least one step.

    Returns:
        (m_hat, v_hat): two 1-D tensors of equal length in the state's dtype (promoted where
            parameters differ), on the first parameter's device.

    Raises:
        TypeError: `optimizer` is not a torch.optim.Optimizer.
        ValueError: it holds no Adam state (not Adam, or no step taken yet).

    Example:
        >>> w = torch.nn.Parameter(torch.zeros(2))
        >>> opt = torch.optim.AdamW([w], lr=0.1)
        >>> w.grad = torch.tensor([3.0, -4.0])
        >>> opt.step()
        >>> m_hat, v_hat = adam_moments(opt)
        >>> m_hat, v_hat.round()
        (tensor([ 3., -4.]), tensor([ 9., 16.]))
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"adam_moments: `optimizer` must be a torch.optim.Optimizer, "
            f"got {type(optimizer).__name__}."
        )
    ms, vs = [], []
    for group in optimizer.param_groups:
        beta1, beta2 = group.get("betas", (None, None))
        for p in group["params"]:
            state = optimizer.state.get(p, {})
            if "exp_avg" not in state or "exp_avg_sq" not in state or beta1 is None:
                continue
            t = float(state["step"])
            v = state["max_exp_avg_sq"] if group.get("amsgrad") else state["exp_avg_sq"]
            ms.append((state["exp_avg"] / (1 - beta1**t)).flatten())
            vs.append((v / (1 - beta2**t)).flatten())
    if not ms:
        raise ValueError(
            "adam_moments: `optimizer` holds no Adam state (exp_avg, exp_avg_sq); pass a "
            "torch.optim.Adam or AdamW after its first step()."
        )
    device = ms[0].device
    return torch.cat([m.to(device) for m in ms]), torch.cat([v.to(device) for v in vs])


# private helpers of the functions above


def _as_list(tensors, func: str, name: str) -> list[torch.Tensor]:
    if isinstance(tensors, torch.Tensor):
        return [tensors]
    if not isinstance(tensors, Iterable):
        raise TypeError(
            f"{func}: `{name}` must be a Tensor or an iterable of Tensors, "
            f"got {type(tensors).__name__}."
        )
    is_generator = isinstance(tensors, types.GeneratorType)
    tensors = list(tensors)  # a generator can be read once: keep it for the second pass
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(
                f"{func}: `{name}` must hold only Tensors, got an element of type "
                f"{type(t).__name__} ({t!r:.40}); pass model.parameters() or a list of tensors."
            )
    if is_generator and not tensors:
        # torch warns the same way: the usual cause is a generator that was already consumed
        warnings.warn(
            f"{func}: `{name}` is an empty generator, no gradient clipping will occur.",
            UserWarning,
            stacklevel=3,
        )
    return tensors


def _positive_finite(value, func: str, name: str, fix: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, torch.Tensor)):
        raise TypeError(
            f"{func}: `{name}` must be a number, got {type(value).__name__} {value!r:.40}; {fix}"
        )
    if isinstance(value, torch.Tensor) and value.numel() != 1:
        raise ValueError(
            f"{func}: `{name}` must be a number or a one-element tensor, got a tensor of shape "
            f"{tuple(value.shape)}; {fix}"
        )
    if isinstance(value, numbers.Integral):
        _checks.number(func, name, int(value), fix)  # an int beyond float range: ValueError
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{func}: `{name}` must be positive and finite, got {value}; {fix}")
    return value


def _norm_type(norm_type, func: str) -> float:
    if isinstance(norm_type, torch.Tensor) and norm_type.numel() == 1:
        norm_type = norm_type.item()  # torch takes a one-element tensor as its number
    if isinstance(norm_type, bool) or not isinstance(norm_type, (numbers.Real, str)):
        raise TypeError(
            f"{func}: `norm_type` must be a number or 'inf', got {type(norm_type).__name__} "
            f"{norm_type!r:.40}; use 2.0 (Euclidean) unless you need another."
        )
    try:
        p = float(norm_type)  # accepts 2, 2.0, '2', 'inf', -1.0, float('-inf') like torch
    except OverflowError:  # an int beyond float range
        raise ValueError(
            f"{func}: `norm_type` must fit a float, got an int of {norm_type.bit_length()} bits; "
            "pass 'inf' for the max-norm."
        ) from None
    except ValueError:
        raise ValueError(
            f"{func}: `norm_type` must be a number or 'inf', got {norm_type!r}; "
            "use 2.0 (Euclidean) unless you need another."
        ) from None
    if math.isnan(p):  # torch accepts nan and turns every gradient into nan
        raise ValueError(
            f"{func}: `norm_type` must not be nan, got {norm_type!r} (a nan norm makes every "
            "gradient nan); use 2.0 (Euclidean) unless you need another."
        )
    # Negative p and -inf are not norms, but torch takes them: vector_norm then gives the
    # generalised mean (sum |x|^p)^(1/p), and -inf the smallest |x|. Same results here.
    return p


def _options(func: str, foreach, error_if_nonfinite=False) -> None:
    # torch reads any truthy value as True; "no" or 2 here is a mistake, not a request
    _checks.boolean(func, "error_if_nonfinite", error_if_nonfinite, "Pass False (the default).")
    if foreach is not None:
        _checks.boolean(func, "foreach", foreach, "Pass None to let the device decide.")


def _use_foreach(tensors: list[torch.Tensor], device: torch.device, foreach, func: str) -> bool:
    supported = device.type in _FOREACH_DEVICES
    if foreach is None:
        return supported and all(type(t) is torch.Tensor for t in tensors)
    if foreach and not supported:
        raise RuntimeError(
            f"{func}: `foreach=True` needs a device with foreach kernels, got "
            f"{device.type} tensors; pass foreach=None or False."
        )
    return bool(foreach)


def _groups(tensors: list[torch.Tensor]) -> dict[tuple, list[torch.Tensor]]:
    # same grouping and order as torch, so the norm of norms sums in the same order
    groups: dict[tuple, list[torch.Tensor]] = {}
    for t in tensors:
        groups.setdefault((t.device, t.dtype), []).append(t)
    return groups
