"""The telephone game: a backward pass multiplies one factor per layer.

Taught by docs/telephone.md (Chapter 0). A gradient reaching layer k of an L-layer chain is
the product of the L - k + 1 factors above it, so it shrinks or grows geometrically with depth:
the vanishing and exploding gradient problem (Hochreiter 1991; Bengio, Simard & Frasconi 1994).
"""

from __future__ import annotations

import math

import torch

from gradflow_ref import _checks
from gradflow_ref.flow import MLPConfig, build_mlp, gradient_norms

__all__ = ["chain_gradients", "network_gradients"]


# beyond this many layers any factor outside [0.93, 1.075] under- or overflows float64 anyway
_MAX_DEPTH = 10_000
_MAX_WIDTH = 65_536  # network_gradients: each layer holds width**2 weights
_MAX_BATCH = 2**20  # network_gradients: rows of the input batch


def chain_gradients(factor: float, depth: int = 50, *, dtype=torch.float64, device=None):
    """Return the gradient each layer of a scalar chain passes back, measured by autograd.

    Layer k computes a_k = factor * a_(k-1); the loss is a_L. Entry k - 1 of the result is
    dLoss/da_(k-1), the gradient layer k sends to the layer below: factor ** (L - k + 1).

    Args:
        factor: each layer's local derivative.
        depth: number of layers L.
        dtype: dtype of the chain (float64 keeps 0.9 ** 50 exact to 15 digits).
        device: device of the chain; CPU when None.

    Returns:
        A tensor of shape (depth,), layer 1 first.

    Raises:
        ValueError: `factor` is not positive and finite, or `depth` < 1.

    Example:
        >>> chain_gradients(0.5, depth=3).tolist()
        [0.125, 0.25, 0.5]
    """
    factor = _check(factor, depth, "chain_gradients", device)
    if dtype is not None:
        _checks.dtype(
            "chain_gradients", "dtype", dtype, fix="Autograd needs floats: torch.float64."
        )
    a = torch.ones((), dtype=dtype, device=device, requires_grad=True)
    inputs = []
    for _ in range(depth):
        inputs.append(a)
        a.retain_grad()
        a = a * factor
    a.backward()
    return torch.stack([x.grad for x in inputs])


def network_gradients(
    factor: float,
    depth: int = 50,
    *,
    width: int = 64,
    batch: int = 16,
    init: str = "orthogonal",
    seed: int = 0,
    device=None,
):
    """Return per-layer gradient norms of a real deep linear network with gain `factor`.

    Every layer is a width x width matrix drawn by `init` and multiplied by `factor`. With
    orthogonal matrices every singular value equals `factor`, so the backward pass multiplies
    the gradient norm by exactly `factor` per layer; Gaussian ("xavier") matrices only do so on
    average. Norms are relative to the gradient arriving at the output.

    Args:
        factor: the gain applied to every weight matrix.
        depth: number of Linear layers.
        width: features per layer.
        batch: rows in the random input batch.
        init: "orthogonal" (exact gain) or "xavier" (gain on average).
        seed: seeds the weights and the input.
        device: where to run; CPU when None.

    Returns:
        A float64 tensor of shape (depth,): ||dLoss/d input of layer k|| / ||dLoss/d output||.

    Raises:
        ValueError: bad `factor`, `depth`, or an `init` other than "orthogonal" or "xavier".
    """
    func = "network_gradients"
    factor = _check(factor, depth, func, device)
    _checks.count(func, "width", width, high=_MAX_WIDTH, fix="Pass features per layer, e.g. 64.")
    _checks.count(func, "batch", batch, high=_MAX_BATCH, fix="Pass rows per batch, e.g. 16.")
    _checks.count(func, "seed", seed, low=0, fix="torch.manual_seed takes 0 to 2**63 - 1.")
    if init not in ("orthogonal", "xavier"):
        raise ValueError(
            f"network_gradients: `init` must be 'orthogonal' or 'xavier', got {init!r}."
        )
    cfg = MLPConfig(
        depth=depth, width=width, activation="identity", init=init, scale=factor, seed=seed
    )
    # float64: at factor 1.1 and depth 50 the norms span a factor of ~117, far from any limit,
    # but the exact-gain comparison with factor ** k is cleaner without float32 rounding.
    model = build_mlp(cfg, dtype=torch.float64, device=device)
    x = torch.randn(
        batch, width, generator=torch.Generator().manual_seed(seed + 1), dtype=torch.float64
    ).to(device)
    norms = gradient_norms(model, x)
    # loss = out.sum(): the gradient at the output is all ones, norm sqrt(batch * width)
    return norms / math.sqrt(batch * width)


# private helpers of the functions above


def _check(factor: float, depth: int, func: str, device) -> float:
    """Check the shared arguments; return `factor` as a float (an int would overflow in torch)."""
    _checks.count(func, "depth", depth, high=_MAX_DEPTH, fix="Pass the layers, e.g. 50.")
    fix = "Pass each layer's gain, e.g. 0.9 or 1.1."
    factor = _checks.bounded(func, "factor", factor, low=0, fix=fix)
    _checks.device(func, "device", device)
    return factor
