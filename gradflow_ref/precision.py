"""Floating-point formats bit by bit: what FP32, FP16, BF16 and FP8 store for a number.

Taught by docs/precision.md (Chapter 4, mixed precision). Every quantity is derived from a
format's three numbers (exponent bits, mantissa bits, bias) with IEEE 754 round-to-nearest-even,
and the tests hold each one against torch's own casts, bit views and `torch.finfo`
(IEEE 754-2019; Micikevicius et al. 2018 for FP16 training; Micikevicius et al. 2022 for FP8).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import torch

from gradflow_ref import _checks

__all__ = [
    "CLASSES",
    "FORMATS",
    "SHORT_NAMES",
    "Bits",
    "FloatFormat",
    "bit_fields",
    "classify",
    "classify_tensor",
    "decode",
    "format_table",
    "get_format",
    "neighbours",
    "relative_error",
    "significant_digits",
    "stored_value",
    "ulp",
]

# What happens to a number stored in a format, from classify() and classify_tensor().
CLASSES = ("zero", "underflow", "subnormal", "normal", "overflow", "inf", "nan")


@dataclass(frozen=True)
class FloatFormat:
    name: str  # torch's dtype name, the key in FORMATS
    label: str  # short name for tables and figures
    dtype: torch.dtype  # the torch dtype that stores it
    exponent_bits: int  # width of the biased exponent field
    mantissa_bits: int  # stored fraction bits; normal numbers add an implicit leading 1
    bias: int  # stored exponent minus bias = power of two
    has_inf: bool  # all-ones exponent means inf/NaN (IEEE); False: only S.1111.111 is NaN
    saturates: bool  # torch's cast clamps overflow (inf included) to +-max instead of inf/NaN

    def __post_init__(self) -> None:
        for name in ("name", "label"):
            _checks.instance("FloatFormat", name, getattr(self, name), str)
        _checks.dtype(
            "FloatFormat", "dtype", self.dtype, fix="Pass the torch dtype that stores it."
        )
        _checks.integer("FloatFormat", "exponent_bits", self.exponent_bits, low=2)
        _checks.integer("FloatFormat", "mantissa_bits", self.mantissa_bits, low=1)
        _checks.integer("FloatFormat", "bias", self.bias, low=0)
        _checks.boolean("FloatFormat", "has_inf", self.has_inf)
        _checks.boolean("FloatFormat", "saturates", self.saturates)

    @property
    def bits(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def bytes(self) -> int:
        return self.bits // 8

    @property
    def emin(self) -> int:
        return 1 - self.bias

    @property
    def emax(self) -> int:
        top = 2**self.exponent_bits - 1  # all-ones exponent: reserved for inf/NaN when has_inf
        return (top - 1 if self.has_inf else top) - self.bias

    @property
    def max(self) -> float:
        # Without inf, the all-ones mantissa of the top exponent is NaN, so max has one bit less.
        frac = 2 - 2.0**-self.mantissa_bits * (1 if self.has_inf else 2)
        return math.ldexp(frac, self.emax)

    @property
    def min_normal(self) -> float:
        return math.ldexp(1.0, self.emin)

    @property
    def min_subnormal(self) -> float:
        return math.ldexp(1.0, self.emin - self.mantissa_bits)

    @property
    def eps(self) -> float:
        return math.ldexp(1.0, -self.mantissa_bits)

    @property
    def decimal_digits(self) -> float:
        return (self.mantissa_bits + 1) * math.log10(2)

    @property
    def overflow_threshold(self) -> float:
        # Magnitudes above max + ulp/2 round past max; the tie itself goes to the even neighbour,
        # which is past max when max's mantissa is odd (all IEEE formats here), not for E4M3FN.
        return self.max + math.ldexp(1.0, self.emax - self.mantissa_bits) / 2


FORMATS: dict[str, FloatFormat] = {
    f.name: f
    for f in (
        FloatFormat("float32", "FP32", torch.float32, 8, 23, 127, True, False),
        FloatFormat("float16", "FP16", torch.float16, 5, 10, 15, True, False),
        FloatFormat("bfloat16", "BF16", torch.bfloat16, 8, 7, 127, True, False),
        FloatFormat("float8_e4m3fn", "FP8 E4M3", torch.float8_e4m3fn, 4, 3, 7, False, True),
        FloatFormat("float8_e5m2", "FP8 E5M2", torch.float8_e5m2, 5, 2, 15, True, False),
    )
}

# The FP8 formats' names in the papers and in gradflow_ref.fp8; accepted wherever a name is.
SHORT_NAMES = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}


class Bits(NamedTuple):
    sign: int  # 0 positive, 1 negative
    exponent: int  # biased exponent field
    mantissa: int  # fraction field
    code: int  # the whole bit pattern as an unsigned integer
    fmt: FloatFormat

    @property
    def pattern(self) -> str:
        e, m = self.fmt.exponent_bits, self.fmt.mantissa_bits
        return f"{self.sign} {self.exponent:0{e}b} {self.mantissa:0{m}b}"


def get_format(fmt: str | torch.dtype | FloatFormat) -> FloatFormat:
    """Return the FloatFormat named by a torch dtype, its name ("bfloat16") or SHORT_NAMES key.

    Raises:
        ValueError: an unknown name or dtype.
        TypeError: `fmt` is neither a str, a torch.dtype nor a FloatFormat.
    """
    return _format(fmt, "get_format")


def _format(fmt, func: str) -> FloatFormat:
    # get_format under the name of the public function that was called
    if isinstance(fmt, FloatFormat):
        return fmt
    if isinstance(fmt, torch.dtype):
        fmt = str(fmt).removeprefix("torch.")
    _checks.instance(func, "fmt", fmt, (str, torch.dtype, FloatFormat), 'e.g. "bfloat16".')
    name = SHORT_NAMES.get(fmt, fmt)
    if name not in FORMATS:
        raise ValueError(
            f"{func}: `fmt` must be one of {', '.join([*FORMATS, *SHORT_NAMES])}, got {fmt!r}. "
            "Use one of these names or the matching torch dtype."
        )
    return FORMATS[name]


def _real(x, func: str) -> float:
    return _checks.number(func, "x", x, "Pass one Python number; use classify_tensor for tensors.")


def _round_unbounded(a: float, f: FloatFormat) -> float:
    # a >= 0 finite. Quantum = spacing of the binade of a (subnormals share emin's spacing);
    # a / q is exact in float64 and Python's round() breaks ties to even.
    if a == 0:
        return 0.0
    e = max(math.frexp(a)[1] - 1, f.emin)
    q = math.ldexp(1.0, e - f.mantissa_bits)
    return round(a / q) * q


def stored_value(x: float, fmt: str | torch.dtype | FloatFormat) -> float:
    """Return the value `fmt` stores for `x`: one round-to-nearest-even of `x` itself.

    Overflow gives inf, except FP8 E4M3FN (no inf), which torch's cast saturates to +-448.
    torch casts a float64 to a narrower format through float32, rounding twice; the two agree
    for every `x` float32 holds exactly, and can differ by one step for others (in FP16,
    1 + 2**-11 + 2**-40 is 1.0 through float32 but 1.0009765625 here).

    Example:
        >>> stored_value(1000.001, "bfloat16")
        1000.0
    """
    f, x = _format(fmt, "stored_value"), _real(x, "stored_value")
    if math.isnan(x):
        return math.nan
    r = math.inf if math.isinf(x) else _round_unbounded(abs(x), f)
    if r > f.max:
        r = f.max if f.saturates else (math.inf if f.has_inf else math.nan)
    return math.copysign(r, x)


def bit_fields(x: float, fmt: str | torch.dtype | FloatFormat) -> Bits:
    """Return the sign, exponent and mantissa fields of the value `fmt` stores for `x`."""
    f = _format(fmt, "bit_fields")
    v = stored_value(_real(x, "bit_fields"), f)
    top, mbits = 2**f.exponent_bits - 1, f.mantissa_bits
    sign = 1 if math.copysign(1.0, v) < 0 else 0
    # NaN: the canonical quiet NaN (top mantissa bit), or E4M3FN's single all-ones NaN; torch's
    # own NaN codes differ in places (its E5M2 NaN is 0x7f), which the widgets follow
    if math.isnan(v):
        sign, exponent, mantissa = 0, top, (1 << (mbits - 1)) if f.has_inf else 2**mbits - 1
    elif math.isinf(v):
        exponent, mantissa = top, 0
    elif abs(v) < f.min_normal:  # zero and subnormals: exponent field 0, no implicit 1
        exponent, mantissa = 0, int(abs(v) / f.min_subnormal)
    else:
        e = math.frexp(abs(v))[1] - 1
        exponent, mantissa = e + f.bias, int((math.ldexp(abs(v), -e) - 1) * 2**mbits)
    code = (sign << (f.bits - 1)) | (exponent << mbits) | mantissa
    return Bits(sign, exponent, mantissa, code, f)


def decode(code: int, fmt: str | torch.dtype | FloatFormat) -> float:
    """Return the value of the bit pattern `code` (an unsigned integer) in `fmt`.

    Raises:
        TypeError: `code` is not an int.
        ValueError: `code` is not an unsigned integer of the format's width.
    """
    f = _format(fmt, "decode")
    _checks.integer("decode", "code", code, low=0, fix="Pass the bit pattern as an int.")
    if code >= 2**f.bits:
        raise ValueError(
            f"decode: `code` must be an integer in [0, 2**{f.bits}) for {f.name}, got {code!r}."
        )
    mbits, top = f.mantissa_bits, 2**f.exponent_bits - 1
    sign = -1.0 if code >> (f.bits - 1) else 1.0
    exponent, mantissa = (code >> mbits) & top, code & (2**mbits - 1)
    if exponent == top and (f.has_inf or mantissa == 2**mbits - 1):
        return math.nan if mantissa else math.copysign(math.inf, sign)
    if exponent == 0:
        return math.copysign(mantissa * f.min_subnormal, sign)
    return math.copysign(math.ldexp(1 + mantissa / 2**mbits, exponent - f.bias), sign)


def ulp(x: float, fmt: str | torch.dtype | FloatFormat) -> float:
    """Return the spacing between neighbouring values of `fmt` at the magnitude of `x`.

    As `math.ulp`: at a power of two, the spacing above it. Constant below the smallest normal.
    """
    f, x = _format(fmt, "ulp"), _real(x, "ulp")
    if not math.isfinite(x):
        return abs(x)
    e = f.emin if x == 0 else min(max(math.frexp(abs(x))[1] - 1, f.emin), f.emax)
    return math.ldexp(1.0, e - f.mantissa_bits)


def relative_error(x: float, fmt: str | torch.dtype | FloatFormat) -> float:
    """Return |stored - x| / |x| (0.0 for x = 0; inf or NaN when x overflows to inf or NaN)."""
    f, x = _format(fmt, "relative_error"), _real(x, "relative_error")
    return 0.0 if x == 0 else abs(stored_value(x, f) - x) / abs(x)


def significant_digits(x: float, fmt: str | torch.dtype | FloatFormat) -> float:
    """Return the decimal digits of precision `fmt` keeps at |x|: significant bits * log10(2).

    Normal numbers keep mantissa_bits + 1 bits; subnormals fewer; 0.0 where nothing survives
    (zero, underflow, overflow, inf, NaN).
    """
    f, x = _format(fmt, "significant_digits"), _real(x, "significant_digits")
    if classify(x, f) not in ("normal", "subnormal"):
        return 0.0
    bits = math.frexp(abs(x))[1] - 1 - round(math.log2(ulp(x, f))) + 1
    return max(bits, 0) * math.log10(2)


def classify(x: float, fmt: str | torch.dtype | FloatFormat) -> str:
    """Return one of CLASSES: what storing `x` in `fmt` does to it."""
    f, x = _format(fmt, "classify"), _real(x, "classify")
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf"
    r = _round_unbounded(abs(x), f)
    if x == 0:
        return "zero"
    if r == 0:
        return "underflow"
    if r > f.max:
        return "overflow"
    return "subnormal" if r < f.min_normal else "normal"


def classify_tensor(t: torch.Tensor, fmt: str | torch.dtype | FloatFormat) -> dict[str, float]:
    """Return the fraction of the elements of `t` in each of CLASSES, cast with torch's cast.

    Raises:
        TypeError: `t` is not a floating-point tensor.
        ValueError: `t` has no elements (no fractions to give).
    """
    f = _format(fmt, "classify_tensor")
    _checks.tensor("classify_tensor", "t", t, floating=True, nonempty=True)
    t = t.detach().reshape(-1)
    a, s = t.abs().double(), t.to(f.dtype).double().abs()
    nan, inf = t.isnan(), t.isinf()
    finite = ~nan & ~inf
    thr = f.overflow_threshold
    over = finite & ((a > thr) | ((a == thr) & f.has_inf))
    masks = {
        "zero": t == 0,
        "underflow": finite & (t != 0) & (s == 0),
        "subnormal": finite & ~over & (s > 0) & (s < f.min_normal),
        "normal": finite & ~over & (s >= f.min_normal),
        "overflow": over,
        "inf": inf,
        "nan": nan,
    }
    return {k: m.sum().item() / t.numel() for k, m in masks.items()}


def neighbours(x: float, fmt: str | torch.dtype | FloatFormat, n: int = 2) -> list[float]:
    """Return the finite values of `fmt` around stored(x): up to `n` below, it, up to `n` above.

    Raises:
        ValueError: `n` outside 0..MAX_NEIGHBOURS, or `x` not finite once stored.
    """
    f, x = _format(fmt, "neighbours"), _real(x, "neighbours")
    _checks.integer("neighbours", "n", n, low=0)
    if n > MAX_NEIGHBOURS:
        raise ValueError(
            f"neighbours: `n` must be at most {MAX_NEIGHBOURS}, got {n}; to list a whole "
            "format, decode its codes with decode(code, fmt)."
        )
    v = stored_value(x, f)
    if not math.isfinite(v):
        raise ValueError(f"neighbours: `x` must be finite once stored in {f.name}, got {x!r}.")
    code, top = bit_fields(abs(v), f).code, 2 ** (f.bits - 1)  # magnitudes: codes below top
    mags = [decode(c, f) for c in range(max(code - n, 0), min(code + n + 1, top))]
    mags = [m for m in mags if math.isfinite(m)]
    vals = sorted({math.copysign(m, v) for m in mags} if v < 0 else set(mags))
    return vals


MAX_NEIGHBOURS = 1024  # neighbours() lists values to read, not a whole format


def format_table() -> list[dict[str, object]]:
    """Return one row per format: bits, range, precision and size, derived from its fields."""
    return [
        {
            "format": f.label,
            "dtype": f"torch.{f.name}",
            "exponent_bits": f.exponent_bits,
            "mantissa_bits": f.mantissa_bits,
            "bias": f.bias,
            "max": f.max,
            "min_normal": f.min_normal,
            "min_subnormal": f.min_subnormal,
            "eps": f.eps,
            "decimal_digits": f.decimal_digits,
            "bytes": f.bytes,
        }
        for f in FORMATS.values()
    ]
