"""Tests for gradflow_ref.precision: every field and value held against torch's casts and finfo."""

import math

import pytest
import torch

from gradflow_ref.precision import (
    CLASSES,
    FORMATS,
    bit_fields,
    classify,
    classify_tensor,
    decode,
    format_table,
    get_format,
    neighbours,
    relative_error,
    significant_digits,
    stored_value,
    ulp,
)

NAMES = list(FORMATS)
# Unsigned views of each width, so a bit pattern reads as the same integer as Bits.code.
UINT = {8: torch.uint8, 16: torch.uint16, 32: torch.uint32}


def _samples(n: int = 1500, seed: int = 0) -> torch.Tensor:
    """Float32 values over every magnitude: random bit patterns, NaNs dropped, plus edge cases."""
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 2**31, (n,), generator=g, dtype=torch.int64)
    codes = torch.where(torch.rand(n, generator=g) < 0.5, codes, codes | 2**31)
    x = codes.to(torch.int32).view(torch.float32)  # int64 -> int32 wraps the top bit into the sign
    edges = [
        0.0,
        -0.0,
        math.inf,
        -math.inf,
        1.0,
        5.75,
        1000.0,
        65504.0,
        65519.0,
        65520.0,
        448.0,
        464.0,
        465.0,
        57344.0,
        61440.0,
        2.0**-24,
        2.0**-25,
        3 * 2.0**-26,
        2.0**-9,
        2.0**-10,
        2.0**-16,
        2.0**-17,
        2.0**-133,
        2.0**-134,
        3e-5,
        2e-5,
        3e-6,
        1e-7,
    ]
    x = torch.cat([x[~x.isnan()], torch.tensor(edges)])
    # narrow magnitudes where the 16- and 8-bit formats round, overflow and underflow
    small = torch.exp2(torch.empty(800).uniform_(-30, 20, generator=g))
    return torch.cat([x, small, -small])


def _ties(name: str) -> torch.Tensor:
    """Exact midpoints between neighbouring finite values of a 16- or 8-bit format (in float32)."""
    f = FORMATS[name]
    codes = torch.arange(0, 2 ** (f.bits - 1) - 1)
    vals = torch.tensor([decode(int(c), f) for c in codes], dtype=torch.float64)
    mids = ((vals[:-1] + vals[1:]) / 2)[vals[:-1].isfinite() & vals[1:].isfinite()]
    return torch.cat([mids, -mids]).to(torch.float32)  # exact: at most 12 significant bits


def _torch_stored(x: torch.Tensor, name: str) -> list[float]:
    return x.to(FORMATS[name].dtype).to(torch.float64).tolist()


def _same(a: float, b: float) -> bool:
    """Equal including the sign of zero, with NaN equal to NaN."""
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


@pytest.mark.parametrize("name", NAMES)
def test_stored_value_matches_torch_cast(name):
    x = _samples()
    want = _torch_stored(x, name)
    got = [stored_value(v, name) for v in x.tolist()]
    bad = [(v, g, w) for v, g, w in zip(x.tolist(), got, want) if not _same(g, w)]
    assert not bad, bad[:5]


@pytest.mark.parametrize("name", [n for n in NAMES if n != "float32"])
def test_stored_value_breaks_ties_to_even_like_torch(name):
    x = _ties(name)
    got = [stored_value(v, name) for v in x.tolist()]
    assert got == _torch_stored(x, name)


def test_stored_value_e4m3fn_saturates_like_torch_cast():
    # torch 2.13's CPU cast clamps every overflow, inf included, to +-448; NaN stays NaN.
    x = torch.tensor([465.0, 1e6, math.inf, -math.inf])
    assert x.to(torch.float8_e4m3fn).float().tolist() == [448.0, 448.0, 448.0, -448.0]
    assert [stored_value(v, "float8_e4m3fn") for v in x.tolist()] == [448.0, 448.0, 448.0, -448.0]
    assert math.isnan(stored_value(math.nan, "float8_e4m3fn"))


def test_stored_value_e5m2_overflows_to_inf_like_torch_cast():
    x = torch.tensor([61439.0, 61440.0])
    assert x.to(torch.float8_e5m2).float().tolist() == [57344.0, math.inf]
    assert [stored_value(v, "float8_e5m2") for v in x.tolist()] == [57344.0, math.inf]


@pytest.mark.parametrize("name", NAMES)
def test_bit_fields_match_torch_bit_view(name):
    f = FORMATS[name]
    x = _samples(seed=1)
    codes = x.to(f.dtype).view(UINT[f.bits]).to(torch.int64).tolist()
    got = [bit_fields(v, f).code for v in x.tolist()]
    assert got == codes


def test_bit_fields_of_5_75_in_fp32():
    b = bit_fields(5.75, "float32")
    assert (b.sign, b.exponent, b.mantissa) == (0, 129, 0b0111 << 19)
    assert b.pattern == "0 10000001 01110000000000000000000"
    assert b.code == torch.tensor(5.75).view(torch.int32).item()


@pytest.mark.parametrize("name", [n for n in NAMES if n != "float32"])
def test_decode_matches_torch_on_every_bit_pattern(name):
    f = FORMATS[name]
    codes = torch.arange(2**f.bits, dtype=torch.int32)
    want = codes.to(UINT[f.bits]).view(f.dtype).to(torch.float64).tolist()
    got = [decode(c, f) for c in range(2**f.bits)]
    bad = [(c, g, w) for c, g, w in zip(range(2**f.bits), got, want) if not _same(g, w)]
    assert not bad, bad[:5]


@pytest.mark.parametrize("name", NAMES)
def test_format_fields_match_torch_finfo(name):
    f, fi = FORMATS[name], torch.finfo(FORMATS[name].dtype)
    assert (f.max, f.min_normal, f.eps, f.bits) == (fi.max, fi.smallest_normal, fi.eps, fi.bits)
    smallest = torch.tensor(1, dtype=torch.int32).to(UINT[f.bits]).view(f.dtype).item()
    assert f.min_subnormal == smallest


def test_format_table_has_one_row_per_format_from_the_fields():
    rows = format_table()
    assert [r["dtype"] for r in rows] == [f"torch.{n}" for n in NAMES]
    fp16 = rows[NAMES.index("float16")]
    assert (fp16["max"], fp16["min_subnormal"], fp16["bytes"]) == (65504.0, 2.0**-24, 2)
    assert fp16["decimal_digits"] == pytest.approx(11 * math.log10(2))


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_ulp_matches_torch_nextafter(name):
    dt = FORMATS[name].dtype
    x = _samples(seed=2)
    x = x[x.isfinite() & (x.to(dt).abs() < torch.finfo(dt).max)].to(dt)
    up = torch.nextafter(x.abs(), torch.tensor(math.inf, dtype=dt))
    want = (up.double() - x.abs().double()).tolist()
    got = [ulp(v, name) for v in x.double().tolist()]
    assert got == want


def test_ulp_of_1000_in_bf16_is_4():
    assert ulp(1000.0, "bfloat16") == 4.0
    assert neighbours(1000.0, "bfloat16", n=2) == [992.0, 996.0, 1000.0, 1004.0, 1008.0]


def test_neighbours_are_consecutive_bit_patterns():
    vals = neighbours(-3e-5, "float16", n=3)
    t = torch.tensor(vals, dtype=torch.float16)
    assert torch.equal(torch.nextafter(t[:-1], t[1:]), t[1:])


def test_relative_error_matches_torch_round_trip():
    x = torch.tensor([3e-5, 2e-5, 3e-6, 1e-7, 1000.001], dtype=torch.float64)
    for name in ("float16", "bfloat16"):
        want = ((x.to(FORMATS[name].dtype).double() - x) / x).abs()
        got = torch.tensor([relative_error(v, name) for v in x.tolist()], dtype=torch.float64)
        # casting float64 directly could round twice (via float32); x here rounds the same way
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_significant_digits_normal_equals_format_digits():
    for f in FORMATS.values():
        assert significant_digits(1.5, f) == pytest.approx(f.decimal_digits)
    # FP16 subnormal 3e-5 keeps 9 bits: 2**-16 <= 3e-5 < 2**-15, spacing 2**-24
    assert significant_digits(3e-5, "float16") == pytest.approx(9 * math.log10(2))
    assert significant_digits(1e-9, "float16") == 0.0


def test_classify_labels_each_case():
    got = [classify(v, "float16") for v in (0.0, 1e-9, 3e-5, 1.0, 65520.0, math.inf, math.nan)]
    assert got == list(CLASSES)
    assert classify(464.0, "float8_e4m3fn") == "normal"  # tie rounds to even 448
    assert classify(465.0, "float8_e4m3fn") == "overflow"


@pytest.mark.parametrize("name", NAMES)
def test_classify_tensor_agrees_with_classify(name):
    x = torch.cat([_samples(seed=3), torch.tensor([math.nan])])
    got = classify_tensor(x, name)
    labels = [classify(v, name) for v in x.tolist()]
    want = {c: labels.count(c) / len(labels) for c in CLASSES}
    assert got == pytest.approx(want, abs=0)
    assert sum(got.values()) == pytest.approx(1.0)


def test_get_format_accepts_dtype():
    assert get_format(torch.bfloat16) is FORMATS["bfloat16"]


def test_get_format_rejects_unknown_name_listing_known():
    with pytest.raises(ValueError, match="float32, float16, bfloat16, float8_e4m3fn, float8_e5m2"):
        get_format("fp12")


def test_get_format_rejects_non_float_dtype():
    with pytest.raises(ValueError, match="got 'int8'"):
        get_format(torch.int8)


def test_stored_value_rejects_non_number():
    with pytest.raises(TypeError, match="`x` must be a real number"):
        stored_value("1.0", "float16")


def test_decode_rejects_code_too_wide():
    with pytest.raises(ValueError, match=r"\[0, 2\*\*8\)"):
        decode(256, "float8_e5m2")


def test_get_format_accepts_the_fp8_short_names():
    assert get_format("e4m3") is FORMATS["float8_e4m3fn"]
    assert decode(1, "e5m2") == decode(1, "float8_e5m2")


def test_neighbours_of_a_large_n_stop_at_the_format_ends():
    vals = neighbours(1.0, "float8_e4m3fn", n=1024)
    assert vals[0] == 0.0 and vals[-1] == FORMATS["float8_e4m3fn"].max


_BAD = [
    (lambda: neighbours(1.0, "float16", n=10**9), ValueError, "neighbours: `n` must be at most"),
    (lambda: neighbours(1.0, "float16", n=-1), ValueError, "neighbours: `n`"),
    (lambda: neighbours(1.0, "float16", n=2.5), TypeError, "neighbours: `n` must be an int"),
    (lambda: stored_value(1.0, None), TypeError, "stored_value: `fmt`"),
    (lambda: stored_value(10**400, "float16"), ValueError, "stored_value: `x` is too large"),
    (lambda: bit_fields(None, "float16"), TypeError, "bit_fields: `x`"),
    (lambda: bit_fields(1.0, "x"), ValueError, "bit_fields: `fmt` must be one of"),
    (lambda: decode(-1, "float16"), ValueError, "decode: `code`"),
    (lambda: decode(1.5, "float16"), TypeError, "decode: `code` must be an int"),
    (lambda: ulp(1.0, None), TypeError, "ulp: `fmt`"),
    (lambda: relative_error(1.0, "e9m9"), ValueError, "relative_error: `fmt`"),
    (lambda: classify(1.0, "int8"), ValueError, "classify: `fmt`"),
    (lambda: significant_digits(1.0, 1), TypeError, "significant_digits: `fmt`"),
    (lambda: classify_tensor(torch.ones(0), "float16"), ValueError, "classify_tensor: `t`"),
    (lambda: classify_tensor([1.0], "float16"), TypeError, "classify_tensor: `t`"),
    (
        lambda: classify_tensor(torch.ones(2, dtype=torch.int64), "float16"),
        TypeError,
        "`t` must be a floating-point",
    ),
]
_BAD_FORMATS = [
    (dict(exponent_bits=-1), ValueError, "`exponent_bits`"),
    (dict(mantissa_bits="10"), TypeError, "`mantissa_bits`"),
    (dict(dtype=None), TypeError, "`dtype`"),
    (dict(has_inf="yes"), TypeError, "`has_inf`"),
    (dict(name=None), TypeError, "`name`"),
]


@pytest.mark.parametrize(("call", "error", "message"), _BAD)
def test_precision_rejects_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize(("change", "error", "message"), _BAD_FORMATS)
def test_float_format_rejects_bad_fields(change, error, message):
    from dataclasses import asdict

    fields = asdict(FORMATS["float16"]) | change
    with pytest.raises(error, match=f"FloatFormat: {message}"):
        type(FORMATS["float16"])(**fields)
