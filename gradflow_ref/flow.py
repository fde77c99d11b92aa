"""Gradient flow through a deep MLP, measured layer by layer with autograd hooks.

Taught by docs/flow.md (Chapter 1, the chain rule is multiplication). Backpropagation multiplies
one Jacobian per layer; whether the product vanishes or explodes is set by the activation's
derivative times the weight matrix's gain (Glorot & Bengio 2010; He et al. 2015).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from gradflow_ref import _checks

__all__ = [
    "ACTIVATIONS",
    "INITS",
    "MLPConfig",
    "build_mlp",
    "gradient_norms",
    "layer_factors",
]

ACTIVATIONS = ("sigmoid", "tanh", "relu", "identity")
INITS = ("unit", "xavier", "he", "orthogonal")


_MAX_DEPTH = 10_000  # MLPConfig's deepest: build_mlp's Python loop makes every layer first
_MAX_WIDTH = 65_536  # MLPConfig's widest: each layer holds width**2 weights


@dataclass
class MLPConfig:
    depth: int = 10  # number of Linear layers
    width: int = 64  # features in and out of every layer
    activation: str = "sigmoid"  # one of ACTIVATIONS, applied after every Linear
    init: str = "xavier"  # one of INITS: how the weight matrices are drawn
    scale: float = 1.0  # multiplies every weight after init (1.0 keeps the init's own gain)
    seed: int = 0  # seeds the weights, so two builds are identical

    def __post_init__(self) -> None:
        _check_fields(self)


def _check_config(cfg: MLPConfig, func: str) -> None:
    _checks.instance(func, "cfg", cfg, MLPConfig, "Pass MLPConfig(depth=..., width=...).")
    _check_fields(cfg)  # again: a dataclass field can be changed after construction


def _check_fields(cfg: MLPConfig) -> None:
    fix = "Pass the number of Linear layers; the guide's are 10 to 50."
    _checks.count("MLPConfig", "depth", cfg.depth, high=_MAX_DEPTH, fix=fix)
    fix = "Pass the features per layer; each layer holds width**2 weights."
    _checks.count("MLPConfig", "width", cfg.width, high=_MAX_WIDTH, fix=fix)
    _checks.choice("MLPConfig", "activation", cfg.activation, ACTIVATIONS)
    _checks.choice("MLPConfig", "init", cfg.init, INITS)
    _checks.real("MLPConfig", "scale", cfg.scale, low=0, fix="1.0 keeps the init's own gain.")
    fix = "torch.manual_seed takes 0 to 2**63 - 1."
    _checks.count("MLPConfig", "seed", cfg.seed, low=0, fix=fix)


def _activation(name: str) -> nn.Module:
    return {
        "sigmoid": nn.Sigmoid,
        "tanh": nn.Tanh,
        "relu": nn.ReLU,
        "identity": nn.Identity,
    }[name]()


def build_mlp(cfg: MLPConfig, *, dtype: torch.dtype = torch.float32, device=None) -> nn.Sequential:
    """Build a bias-free MLP of `cfg.depth` (Linear, activation) blocks.

    Args:
        cfg: depth, width, activation, init, scale and seed.
        dtype: parameter dtype.
        device: parameter device; CPU when None.

    Returns:
        An `nn.Sequential` alternating Linear and activation modules.

    Raises:
        TypeError: `cfg` is not an MLPConfig, `dtype` not a floating torch dtype, or `device`
            not a str or torch.device.
        ValueError: a field of `cfg` is out of range, or `device` names no device here.

    Example:
        >>> net = build_mlp(MLPConfig(depth=3, width=4, activation="relu", init="he"))
        >>> len(net)
        6
    """
    _check_config(cfg, "build_mlp")
    _checks.dtype("build_mlp", "dtype", dtype)
    _checks.device("build_mlp", "device", device)
    gen = torch.Generator().manual_seed(cfg.seed)
    layers: list[nn.Module] = []
    for _ in range(cfg.depth):
        linear = nn.Linear(cfg.width, cfg.width, bias=False, dtype=dtype, device=device)
        w = torch.empty(cfg.width, cfg.width, dtype=torch.float64)
        n = cfg.width
        if cfg.init == "unit":
            # every entry ~ N(0, 1): "weights of size one", far too large a gain for a layer
            w.normal_(0.0, 1.0, generator=gen)
        elif cfg.init == "xavier":
            w.normal_(0.0, math.sqrt(2.0 / (n + n)), generator=gen)
        elif cfg.init == "he":
            w.normal_(0.0, math.sqrt(2.0 / n), generator=gen)
        else:
            # QR of a Gaussian matrix; sign fix makes the draw uniform over orthogonal matrices
            q, r = torch.linalg.qr(torch.randn(n, n, generator=gen, dtype=torch.float64))
            w.copy_(q * torch.sign(torch.diagonal(r)))
        with torch.no_grad():
            linear.weight.copy_(w * cfg.scale)  # cast to `dtype` on copy
        layers += [linear, _activation(cfg.activation)]
    return nn.Sequential(*layers)


def _linears(model, x, func: str) -> list[nn.Linear]:
    _checks.instance(func, "model", model, nn.Sequential, "Build one with build_mlp(cfg).")
    linears = [m for m in model if isinstance(m, nn.Linear)]
    if not linears:
        raise ValueError(f"{func}: `model` must contain at least one nn.Linear layer.")
    _checks.model_input(func, "x", model, x)
    fix = "Pass a (batch, width) batch; one sample is x.unsqueeze(0)."
    _checks.tensor(func, "x", x, floating=True, dim=2, fix=fix)
    weight = linears[0].weight
    if x.dtype != weight.dtype or x.device != weight.device:
        raise ValueError(
            f"{func}: `x` must match the model's parameters, {weight.dtype} on {weight.device}, "
            f"got {x.dtype} on {x.device}; use x.to(weight.dtype, weight.device)."
        )
    if not torch.isfinite(x).all():
        raise ValueError(
            f"{func}: `x` holds nan or inf, so every gradient norm would be nan; "
            "pass a finite batch, e.g. torch.randn(batch, width)."
        )
    return linears


def gradient_norms(model: nn.Sequential, x: torch.Tensor, loss=None) -> torch.Tensor:
    """Return the norm of dLoss/d(input of Linear layer k) for every Linear layer k.

    The gradient is read by a tensor hook on each layer's input, registered by a forward
    pre-hook, so it is exactly what autograd passes back through the network.

    Args:
        model: a Sequential containing Linear layers (e.g. from `build_mlp`).
        x: the input batch, shape (batch, width).
        loss: a function of the model output returning a scalar; `output.sum()` when None.

    Returns:
        A float64 tensor of shape (number of Linear layers,), first layer first.

    Raises:
        TypeError: `model` is not an nn.Sequential or `x` not a tensor.
        ValueError: the model contains no Linear layer, or `x` is empty, of the wrong width or
            not finite.
    """
    linears = _linears(model, x, "gradient_norms")
    if loss is not None:
        _checks.callable_("gradient_norms", "loss", loss, "Pass loss(output) -> scalar, or None.")
    norms: list[torch.Tensor | None] = [None] * len(linears)
    handles = []

    def pre_hook_for(k: int):
        def pre_hook(module, args):
            (inp,) = args
            if inp.requires_grad:
                inp.register_hook(lambda g: norms.__setitem__(k, g.detach().double().norm()))

        return pre_hook

    for k, layer in enumerate(linears):
        handles.append(layer.register_forward_pre_hook(pre_hook_for(k)))
    try:
        # the input itself needs a gradient so that the first layer's hook fires
        out = model(x.detach().requires_grad_(True))
        value = out.sum() if loss is None else loss(out)
        if not (isinstance(value, torch.Tensor) and value.dim() == 0 and value.requires_grad):
            got = value.dtype if isinstance(value, torch.Tensor) else type(value).__name__
            shape = f" of shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else ""
            raise TypeError(
                f"gradient_norms: `loss` must return a scalar tensor built from the output, got "
                f"{got}{shape}; return e.g. out.pow(2).mean()."
            )
        value.backward()
    finally:
        for h in handles:
            h.remove()
    return torch.stack(
        [n if n is not None else x.new_zeros((), dtype=torch.float64) for n in norms]
    )


def layer_factors(model: nn.Sequential, x: torch.Tensor) -> torch.Tensor:
    """Return each Linear layer's measured backward factor ||g_in|| / ||g_out||.

    The factor of layer k is the gradient norm at its input divided by the norm one block
    later (at the next Linear's input, or at the output for the last block): the quantity
    whose product over layers is the whole network's gain.

    Args:
        model: a Sequential of (Linear, activation) blocks.
        x: the input batch, shape (batch, width).

    Returns:
        A float64 tensor of shape (number of Linear layers,).

    Raises:
        TypeError / ValueError: as gradient_norms.
    """
    _linears(model, x, "layer_factors")
    norms = gradient_norms(model, x)
    # with loss = out.sum(), the gradient at the output is all ones: its norm is sqrt(numel)
    last = [m for m in model if isinstance(m, nn.Linear)][-1]
    out_norm = torch.tensor(
        float(x.shape[0] * last.out_features), dtype=torch.float64, device=norms.device
    ).sqrt()
    following = torch.cat([norms[1:], out_norm.reshape(1)])
    return norms / following
