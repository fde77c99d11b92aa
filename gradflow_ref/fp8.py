"""FP8: scaled quantization to the E4M3 and E5M2 formats of gradflow_ref.precision.

An FP8 tensor holds x * scale rounded to 8 bits; the scale maps the tensor's largest magnitude
(amax) onto the format's largest finite value. Per-tensor "current" scaling takes the amax of
the tensor itself, "delayed" scaling the largest amax of the last few steps (Micikevicius et
al., "FP8 formats for deep learning", arXiv:2209.05433), block scaling one amax per 1x128 or
128x128 tile. Chapter 5b (docs/hardware.md) teaches it.
"""

from __future__ import annotations

import functools
from collections import deque

import torch

from gradflow_ref import _checks
from gradflow_ref.precision import SHORT_NAMES, FloatFormat, _format, decode

__all__ = [
    "values",
    "fake_quantize",
    "current_scaling",
    "block_scaling",
    "DelayedScaling",
    "tensor_relative_error",
    "flushed_to_zero",
]


_MAX_HISTORY = 10**6  # DelayedScaling's longest amax history


def values(fmt) -> list[float]:
    """Return the values of all 256 codes of `fmt` ("e4m3", "e5m2" or its FloatFormat), in code
    order (gradflow_ref.precision.decode of each)."""
    return list(_decoded(_fmt(fmt, "values")))


@functools.cache
def _decoded(fmt: FloatFormat) -> tuple[float, ...]:
    return tuple(decode(code, fmt) for code in range(256))


def _scale_arg(func: str, scale, x: torch.Tensor) -> torch.Tensor:
    if isinstance(scale, torch.Tensor):
        _checks.tensor(func, "scale", scale, floating=True, nonempty=True)
        try:
            torch.broadcast_shapes(scale.shape, x.shape)
        except RuntimeError:
            raise ValueError(
                f"{func}: `scale` of shape {tuple(scale.shape)} must broadcast to `x` of shape "
                f"{tuple(x.shape)}; pass one number or one scale per block."
            ) from None
    else:
        _checks.number(func, "scale", scale, "Pass a positive number or a tensor of them.")
    scale = torch.as_tensor(scale, dtype=torch.float32, device=x.device)
    if not (torch.isfinite(scale).all() and (scale > 0).all()):
        bad = scale[~(torch.isfinite(scale) & (scale > 0))].reshape(-1)[0].item()
        raise ValueError(
            f"{func}: `scale` must be positive and finite, got {bad}; it maps the tensor's "
            "amax onto the format's max, so it is format max / amax."
        )
    return scale


def fake_quantize(x: torch.Tensor, fmt, scale: torch.Tensor | float) -> torch.Tensor:
    """Return x rounded through FP8 and back: (x * scale, saturated, cast to FP8) / scale.

    Args:
        x: a floating tensor.
        fmt: "e4m3", "e5m2" or their FloatFormat.
        scale: a positive scale broadcastable to `x`.

    Returns:
        A tensor of x's dtype holding the values an FP8 tensor with this scale represents.
        Magnitudes beyond the format's max saturate to it (no inf), as a scaled cast does.

    Raises:
        TypeError: `x` is not a floating tensor, or `scale` not a number or tensor.
        ValueError: a scale that is not positive and finite, or does not broadcast to `x`.

    Example:
        >>> fake_quantize(torch.tensor([0.3]), "e4m3", 1.0)
        tensor([0.3125])
    """
    fmt = _fmt(fmt, "fake_quantize")
    _checks.tensor("fake_quantize", "x", x, floating=True)
    return _quantize(x, fmt, _scale_arg("fake_quantize", scale, x))


def _quantize(x: torch.Tensor, fmt: FloatFormat, scale: torch.Tensor) -> torch.Tensor:
    limit = fmt.max
    scaled = (x.float() * scale).clamp(-limit, limit)
    return (scaled.to(fmt.dtype).float() / scale).to(x.dtype)


def _scale(amax: torch.Tensor, fmt: FloatFormat) -> torch.Tensor:
    # an all-zero tensor or block keeps scale 1: nothing to map
    return torch.where(amax > 0, fmt.max / amax.clamp_min(torch.finfo(torch.float32).tiny), 1.0)


def _scaled_input(func: str, x) -> torch.Tensor:
    # an inf or NaN amax would give every element a scale of 0 or NaN: refuse it here
    return _checks.tensor(
        func,
        "x",
        x,
        floating=True,
        nonempty=True,
        finite=True,
        fix="Its amax sets the scale; find where the inf/NaN came from first.",
    )


def current_scaling(x: torch.Tensor, fmt) -> torch.Tensor:
    """Fake-quantize `x` with one scale from its own amax (per-tensor current scaling).

    Raises:
        TypeError: `x` is not a floating tensor.
        ValueError: `x` is empty or holds inf/NaN (its amax would set no usable scale).
    """
    fmt = _fmt(fmt, "current_scaling")
    x = _scaled_input("current_scaling", x)
    return _quantize(x, fmt, _scale(x.detach().abs().max().float(), fmt))


def block_scaling(x: torch.Tensor, fmt, block: tuple[int, int] = (1, 128)) -> torch.Tensor:
    """Fake-quantize a 2-D `x` with one scale per `block` tile (e.g. 1x128 or 128x128).

    Raises:
        TypeError: `x` is not a floating tensor, or `block` not a pair of ints.
        ValueError: `x` is not 2-D, empty or not finite, or its shape is not a multiple of
            `block`.
    """
    func = "block_scaling"
    fmt = _fmt(fmt, func)
    x = _scaled_input(func, x)
    _checks.tensor(func, "x", x, dim=2)
    _checks.pair(func, "block", block, "Pass (rows, cols), e.g. (1, 128).")
    rows = _checks.integer(func, "block[0]", block[0])
    cols = _checks.integer(func, "block[1]", block[1])
    if x.shape[0] % rows or x.shape[1] % cols:
        raise ValueError(
            f"{func}: `x` of shape {tuple(x.shape)} must split into `block` {block} tiles; "
            "pad it or pick a block that divides the shape."
        )
    r, c = x.shape[0] // rows, x.shape[1] // cols
    tiles = x.reshape(r, rows, c, cols)
    amax = tiles.detach().abs().float().amax(dim=(1, 3), keepdim=True)
    return _quantize(tiles, fmt, _scale(amax, fmt)).reshape(x.shape)


class DelayedScaling:
    """Per-tensor delayed scaling: the scale comes from the amax of the previous steps.

    States: EMPTY (no amax seen yet; the first call scales by its own amax) and RECORDING.

    Args:
        fmt: "e4m3", "e5m2" or their FloatFormat.
        history: how many past amax values the scale looks at (the largest is used).

    Raises:
        TypeError / ValueError: `history` not an int >= 1, or an unknown `fmt`.
    """

    EMPTY, RECORDING = "EMPTY", "RECORDING"

    def __init__(self, fmt, history: int = 16):
        fix = "Pass how many steps to keep, e.g. 16."
        _checks.count("DelayedScaling", "history", history, high=_MAX_HISTORY, fix=fix)
        self.fmt = _fmt(fmt, "DelayedScaling")
        self.amax_history: deque = deque(maxlen=history)

    @property
    def state(self) -> str:
        return self.RECORDING if self.amax_history else self.EMPTY

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Fake-quantize `x` with the scale of the history, then record x's own amax."""
        x = _scaled_input("DelayedScaling", x)
        amax = x.detach().abs().max().float()
        past = torch.stack(list(self.amax_history)).max() if self.amax_history else amax
        out = _quantize(x, self.fmt, _scale(past, self.fmt))
        self.amax_history.append(amax)
        return out


def _pair(func: str, x, approx) -> None:
    _checks.tensor(func, "x", x, nonempty=True)
    _checks.tensor(func, "approx", approx)
    _checks.same_shape(func, "x", x, "approx", approx)


def tensor_relative_error(x: torch.Tensor, approx: torch.Tensor) -> float:
    """Return ||x - approx|| / ||x|| in float64.

    The error of a whole tensor; gradflow_ref.precision.relative_error is one number's.

    Raises:
        TypeError: `x` or `approx` is not a tensor.
        ValueError: `x` is empty or all zeros (no error relative to it), or the two differ in
            shape.
    """
    _pair("tensor_relative_error", x, approx)
    x, approx = x.double(), approx.double()
    norm = torch.linalg.vector_norm(x)
    if norm == 0:
        raise ValueError(
            "tensor_relative_error: `x` is all zeros, so no error is relative to it; compare "
            "torch.linalg.vector_norm(x - approx) instead."
        )
    return float(torch.linalg.vector_norm(x - approx) / norm)


def flushed_to_zero(x: torch.Tensor, approx: torch.Tensor) -> float:
    """Return the fraction of x's nonzero elements that `approx` holds as zero.

    Raises:
        TypeError: `x` or `approx` is not a tensor.
        ValueError: `x` is empty or all zeros (nothing to flush), or the two differ in shape.
    """
    _pair("flushed_to_zero", x, approx)
    nonzero = x != 0
    count = int(nonzero.sum())
    if not count:
        raise ValueError(
            "flushed_to_zero: `x` is all zeros, so no nonzero value could be flushed; the "
            "fraction is undefined. Pass the tensor before quantization."
        )
    return float(((approx == 0) & nonzero).sum()) / count


# private helpers of the functions above


def _fmt(fmt, func: str) -> FloatFormat:
    # an FP8 format of gradflow_ref.precision: "e4m3", "e5m2", a dtype name, dtype or FloatFormat
    f = _format(fmt, func)
    if f.bits != 8:
        raise ValueError(
            f"{func}: `fmt` must be an FP8 format ({', '.join(map(repr, SHORT_NAMES))}), "
            f"got {f.name}; gradflow_ref.precision covers the wider formats."
        )
    return f
