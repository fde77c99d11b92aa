"""FP32 master weights behind a BF16 model: the mixed-precision training recipe.

Taught by docs/precision.md (Chapter 4, mixed precision). The model runs forward and backward in
BF16 (or FP16); an FP32 copy of every parameter, and the optimizer state built on it, takes the
update, so updates smaller than half a BF16 spacing are kept instead of rounded away
(Micikevicius et al. 2018, "Mixed Precision Training").
"""

from __future__ import annotations

import torch
from torch import nn

from gradflow_ref import _checks

__all__ = ["MasterWeights", "training_state_bytes"]

LOW_PRECISION = (torch.bfloat16, torch.float16)


class MasterWeights:
    """Keep FP32 master copies of a model's parameters and cast the model to `dtype`.

    `model` is cast in place (as `model.to(dtype)`) and is `mw.model` afterwards; `mw.params`
    are the FP32 masters, in `model.parameters()` order, on each parameter's own device, for
    any torch optimizer (whose state is then FP32 too).

    Args:
        model: the module to train, with floating-point parameters (any dtype, any device).
        dtype: the working precision, torch.bfloat16 or torch.float16.

    Raises:
        TypeError: `model` is not an nn.Module.
        ValueError: `dtype` is not BF16/FP16, or the model has no floating-point parameters.

    Example:
        >>> mw = MasterWeights(nn.Linear(4, 1))
        >>> opt = torch.optim.AdamW(mw.params, lr=1e-3)
        >>> loss = mw.model(torch.randn(8, 4, dtype=torch.bfloat16)).float().pow(2).mean()
        >>> loss.backward()
        >>> mw.grads_to_master(); opt.step(); mw.master_to_model(); mw.zero_grad()
    """

    def __init__(self, model: nn.Module, dtype: torch.dtype = torch.bfloat16) -> None:
        if not isinstance(model, nn.Module):
            raise TypeError(
                f"MasterWeights: `model` must be a torch.nn.Module, got {type(model).__name__}."
            )
        _checks.instance("MasterWeights", "dtype", dtype, torch.dtype, "E.g. torch.bfloat16.")
        if dtype not in LOW_PRECISION:
            raise ValueError(
                f"MasterWeights: `dtype` must be torch.bfloat16 or torch.float16, got {dtype}. "
                "FP32 training needs no master copy."
            )
        params = list(model.parameters())
        if not params or not all(p.is_floating_point() for p in params):
            raise ValueError(
                "MasterWeights: `model` must have floating-point parameters, got "
                f"{[p.dtype for p in params] or 'none'}."
            )
        _fits("MasterWeights", "model", dict(model.named_parameters()), dtype, "the cast")
        # Copy before the cast: masters keep the model's full-precision values.
        self.params = [nn.Parameter(p.detach().to(torch.float32, copy=True)) for p in params]
        self.model = model.to(dtype)
        self.dtype = dtype

    def _pairs(self):
        return zip(self.model.parameters(), self.params)

    def grads_to_master(self) -> None:
        """Set each master's `.grad` to its model parameter's gradient, cast to FP32."""
        for p, m in self._pairs():
            m.grad = None if p.grad is None else p.grad.detach().to(torch.float32)

    @torch.no_grad()
    def master_to_model(self) -> None:
        """Copy the (updated) FP32 masters into the model, rounding to nearest even in `dtype`.

        A master beyond `dtype`'s range becomes inf in the model, as any cast does: that is how
        a diverging FP16 run shows itself, so it is not refused here (the constructor refuses
        weights that would overflow before training starts).
        """
        for p, m in self._pairs():
            p.copy_(m)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradients of the model and of the masters (to None, as torch's default)."""
        _checks.boolean("MasterWeights.zero_grad", "set_to_none", set_to_none)
        self.model.zero_grad(set_to_none=set_to_none)
        for m in self.params:
            if m.grad is not None:
                if set_to_none:
                    m.grad = None
                else:
                    m.grad.zero_()


@torch.no_grad()
def _fits(func: str, arg: str, params: dict, dtype: torch.dtype, action: str) -> None:
    """Refuse values `dtype` cannot hold before anything is cast (inf would replace them)."""
    limit = torch.finfo(dtype).max
    for name, p in params.items():
        if p.numel() and not bool(p.detach().abs().amax() <= limit):  # also catches nan
            big = p.detach().abs().amax().item()
            raise ValueError(
                f"{func}: `{arg}` holds {name} with |value| up to {big:.4g}, but {dtype} holds at "
                f"most {limit:.4g}, so {action} would make it inf; use torch.bfloat16 (FP32's "
                "range), lower the learning rate, or rescale the weights."
            )


def _instance(name: str, value, cls) -> None:
    if not isinstance(value, cls):
        raise TypeError(
            f"training_state_bytes: `{name}` must be a {cls.__name__}, got {type(value).__name__}."
        )


def _nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors if t is not None)


def training_state_bytes(
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    master: MasterWeights | None = None,
) -> dict[str, int]:
    """Count the bytes the training state holds now, from the tensors themselves.

    Args:
        model: the module whose parameters run forward and backward.
        optimizer: its state tensors are counted per key (Adam: `exp_avg`, `exp_avg_sq`, `step`).
        master: FP32 masters, counted as `master` and `master_grads`.

    Returns:
        {"weights", "grads", "master", "master_grads", then one entry per optimizer state key}.

    Raises:
        TypeError: `model` is not an nn.Module, `optimizer` not a torch optimizer or `master`
            not a MasterWeights.
        ValueError: `optimizer` or `master` belongs to another model.
    """
    _instance("model", model, nn.Module)
    if optimizer is not None:
        _instance("optimizer", optimizer, torch.optim.Optimizer)
    if master is not None:
        _instance("master", master, MasterWeights)
    params = list(model.parameters())
    ours = {id(p) for p in params} | {id(m) for m in (master.params if master else ())}
    if master is not None and master.model is not model:
        raise ValueError(
            "training_state_bytes: `master` holds the masters of another model; pass the model "
            "it was built from (master.model), or no master."
        )
    theirs = [p for g in (optimizer.param_groups if optimizer else ()) for p in g["params"]]
    if any(id(p) not in ours for p in theirs):
        raise ValueError(
            "training_state_bytes: `optimizer` updates parameters that are neither `model`'s "
            "nor `master`'s, so its state is another model's; pass the optimizer built on "
            "model.parameters() (or master.params)."
        )
    out = {
        "weights": _nbytes(params),
        "grads": _nbytes(p.grad for p in params),
        "master": _nbytes(master.params) if master else 0,
        "master_grads": _nbytes(m.grad for m in master.params) if master else 0,
    }
    for state in optimizer.state.values() if optimizer else ():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                out[key] = out.get(key, 0) + _nbytes([value])
    return out
