"""FP8: the E4M3 and E5M2 formats from their bits, and scaled quantization to them.

An FP8 tensor holds x * scale rounded to 8 bits; the scale maps the tensor's largest magnitude
(amax) onto the format's largest finite value. Per-tensor "current" scaling takes the amax of
the tensor itself, "delayed" scaling the largest amax of the last few steps (Micikevicius et
al., "FP8 formats for deep learning", arXiv:2209.05433), block scaling one amax per 1x128 or
128x128 tile. Chapter 5b (docs/hardware.md) teaches it.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from dataclasses import dataclass

import torch

__all__ = [
    "Float8Format",
    "FORMATS",
    "decode",
    "values",
    "fake_quantize",
    "current_scaling",
    "block_scaling",
    "DelayedScaling",
    "relative_error",
    "flushed_to_zero",
]


@dataclass(frozen=True)
class Float8Format:
    """An 8-bit float: 1 sign bit, `exponent_bits`, `mantissa_bits`."""

    name: str  # "e4m3" or "e5m2"
    exponent_bits: int  # 4 or 5
    mantissa_bits: int  # 3 or 2
    has_inf: bool  # E5M2 keeps IEEE inf/NaN codes; E4M3 ("fn") has no inf, one NaN pattern
    dtype: torch.dtype  # torch's matching dtype

    @property
    def bias(self) -> int:
        return 2 ** (self.exponent_bits - 1) - 1

    @property
    def max(self) -> float:
        """Largest finite value, read off the decoded codes."""
        return max(v for v in values(self) if math.isfinite(v))

    @property
    def min_normal(self) -> float:
        """Smallest positive value with an implicit leading 1 (exponent field 1)."""
        return 2.0 ** (1 - self.bias)

    @property
    def min_subnormal(self) -> float:
        """Smallest positive value: exponent field 0, last mantissa bit set."""
        return min(v for v in values(self) if v > 0)

    @property
    def spacing_at_one(self) -> float:
        """Gap between 1.0 and the next larger value."""
        return min(v for v in values(self) if v > 1.0) - 1.0


def decode(code: int, fmt: Float8Format) -> float:
    """Return the value of the 8-bit pattern `code` (0-255) in format `fmt`.

    Raises:
        ValueError: `code` outside 0-255.
    """
    if isinstance(code, bool) or not isinstance(code, int) or not 0 <= code <= 255:
        raise ValueError(f"decode: `code` must be an int in 0..255, got {code!r}.")
    e_bits, m_bits = fmt.exponent_bits, fmt.mantissa_bits
    sign = -1.0 if code >> 7 else 1.0
    exponent = (code >> m_bits) & ((1 << e_bits) - 1)
    mantissa = code & ((1 << m_bits) - 1)
    top = (1 << e_bits) - 1
    if fmt.has_inf and exponent == top:  # IEEE: all-ones exponent is inf (mantissa 0) or NaN
        return sign * math.inf if mantissa == 0 else math.nan
    if not fmt.has_inf and exponent == top and mantissa == (1 << m_bits) - 1:
        return math.nan  # E4M3fn: only S.1111.111 is NaN, the rest of the top binade is finite
    if exponent == 0:  # subnormal: no implicit 1
        return sign * mantissa * 2.0 ** (1 - fmt.bias - m_bits)
    return sign * (1 + mantissa / (1 << m_bits)) * 2.0 ** (exponent - fmt.bias)


def values(fmt: Float8Format) -> list[float]:
    """Return the values of all 256 codes of `fmt` ("e4m3", "e5m2" or a Float8Format), in code
    order."""
    return list(_decoded(_fmt(fmt, "values")))


@functools.cache  # the properties above read the table on every call
def _decoded(fmt: Float8Format) -> tuple[float, ...]:
    return tuple(decode(code, fmt) for code in range(256))


FORMATS = {
    "e4m3": Float8Format("e4m3", 4, 3, has_inf=False, dtype=torch.float8_e4m3fn),
    "e5m2": Float8Format("e5m2", 5, 2, has_inf=True, dtype=torch.float8_e5m2),
}


def _fmt(fmt, func: str = "fp8") -> Float8Format:
    if isinstance(fmt, str) and fmt in FORMATS:
        return FORMATS[fmt]
    if isinstance(fmt, Float8Format):
        return fmt
    error = ValueError if isinstance(fmt, str) else TypeError
    raise error(f"{func}: `fmt` must be one of {sorted(FORMATS)} or a Float8Format, got {fmt!r}.")


def fake_quantize(x: torch.Tensor, fmt, scale: torch.Tensor | float) -> torch.Tensor:
    """Return x rounded through FP8 and back: (x * scale, saturated, cast to FP8) / scale.

    Args:
        x: a floating tensor.
        fmt: "e4m3", "e5m2" or a Float8Format.
        scale: a positive scale broadcastable to `x`.

    Returns:
        A tensor of x's dtype holding the values an FP8 tensor with this scale represents.
        Magnitudes beyond the format's max saturate to it (no inf), as a scaled cast does.

    Raises:
        TypeError: `x` is not a floating tensor.
        ValueError: a scale that is not positive and finite.
    """
    fmt = _fmt(fmt)
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"fake_quantize: `x` must be a floating tensor, got {type(x).__name__}.")
    scale = torch.as_tensor(scale, dtype=torch.float32, device=x.device)
    if not (torch.isfinite(scale).all() and (scale > 0).all()):
        raise ValueError(f"fake_quantize: `scale` must be positive and finite, got {scale}.")
    limit = fmt.max
    scaled = (x.float() * scale).clamp(-limit, limit)
    return (scaled.to(fmt.dtype).float() / scale).to(x.dtype)


def _scale(amax: torch.Tensor, fmt: Float8Format) -> torch.Tensor:
    # an all-zero tensor or block keeps scale 1: nothing to map
    return torch.where(amax > 0, fmt.max / amax.clamp_min(torch.finfo(torch.float32).tiny), 1.0)


def current_scaling(x: torch.Tensor, fmt) -> torch.Tensor:
    """Fake-quantize `x` with one scale from its own amax (per-tensor current scaling)."""
    fmt = _fmt(fmt)
    return fake_quantize(x, fmt, _scale(x.detach().abs().max().float(), fmt))


def block_scaling(x: torch.Tensor, fmt, block: tuple[int, int] = (1, 128)) -> torch.Tensor:
    """Fake-quantize a 2-D `x` with one scale per `block` tile (e.g. 1x128 or 128x128).

    Raises:
        ValueError: `x` is not 2-D, or its shape is not a multiple of `block`.
    """
    fmt = _fmt(fmt)
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise ValueError(f"block_scaling: `x` must be a 2-D tensor, got {getattr(x, 'shape', x)}.")
    rows, cols = block
    if rows < 1 or cols < 1 or x.shape[0] % rows or x.shape[1] % cols:
        raise ValueError(
            f"block_scaling: `x` of shape {tuple(x.shape)} must split into `block` {block} tiles; "
            "pad it or pick a block that divides the shape."
        )
    r, c = x.shape[0] // rows, x.shape[1] // cols
    tiles = x.reshape(r, rows, c, cols)
    amax = tiles.detach().abs().float().amax(dim=(1, 3), keepdim=True)
    return fake_quantize(tiles, fmt, _scale(amax, fmt)).reshape(x.shape)


class DelayedScaling:
    """Per-tensor delayed scaling: the scale comes from the amax of the previous steps.

    States: EMPTY (no amax seen yet; the first call scales by its own amax) and RECORDING.

    Args:
        fmt: "e4m3", "e5m2" or a Float8Format.
        history: how many past amax values the scale looks at (the largest is used).

    Raises:
        ValueError: `history` below 1.
    """

    EMPTY, RECORDING = "EMPTY", "RECORDING"

    def __init__(self, fmt, history: int = 16):
        if isinstance(history, bool) or not isinstance(history, int) or history < 1:
            raise ValueError(f"DelayedScaling: `history` must be an int >= 1, got {history!r}.")
        self.fmt = _fmt(fmt)
        self.amax_history: deque = deque(maxlen=history)

    @property
    def state(self) -> str:
        return self.RECORDING if self.amax_history else self.EMPTY

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Fake-quantize `x` with the scale of the history, then record x's own amax."""
        amax = x.detach().abs().max().float()
        past = torch.stack(list(self.amax_history)).max() if self.amax_history else amax
        out = fake_quantize(x, self.fmt, _scale(past, self.fmt))
        self.amax_history.append(amax)
        return out


def relative_error(x: torch.Tensor, approx: torch.Tensor) -> float:
    """Return ||x - approx|| / ||x|| in float64 (0 for an all-zero x equal to approx)."""
    x, approx = x.double(), approx.double()
    norm = torch.linalg.vector_norm(x)
    diff = torch.linalg.vector_norm(x - approx)
    return float(diff / norm) if norm > 0 else float(diff)


def flushed_to_zero(x: torch.Tensor, approx: torch.Tensor) -> float:
    """Return the fraction of x's nonzero elements that `approx` holds as zero."""
    nonzero = x != 0
    count = int(nonzero.sum())
    return float(((approx == 0) & nonzero).sum()) / count if count else 0.0
