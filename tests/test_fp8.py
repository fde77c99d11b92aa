"""gradflow_ref.fp8: the FP8 formats of gradflow_ref.precision against torch's float8 dtypes,
and scaling."""

from __future__ import annotations

import math

import pytest
import torch

from gradflow_ref import fp8
from gradflow_ref.precision import FORMATS, SHORT_NAMES, get_format


@pytest.mark.parametrize("name", list(SHORT_NAMES))
def test_values_match_torch_float8_for_every_code(name):
    fmt = get_format(name)
    theirs = torch.arange(256, dtype=torch.uint8).view(fmt.dtype).float().tolist()
    for code, (ours, ref) in enumerate(zip(fp8.values(fmt), theirs)):
        assert ours == ref or (math.isnan(ours) and math.isnan(ref)), code


@pytest.mark.parametrize("name", list(SHORT_NAMES))
def test_format_limits_match_torch_finfo(name):
    fmt, info = get_format(name), torch.finfo(get_format(name).dtype)
    assert fmt.max == info.max
    assert fmt.min_normal == info.tiny
    assert fmt.eps == info.eps
    assert fmt.min_subnormal == fmt.min_normal * 2.0**-fmt.mantissa_bits


def test_e4m3_has_no_inf_and_e5m2_has():
    assert not any(math.isinf(v) for v in fp8.values("e4m3"))
    assert sum(math.isinf(v) for v in fp8.values("e5m2")) == 2


def test_fake_quantize_equals_torch_cast_within_range():
    x = torch.linspace(-400, 400, 1001)
    ours = fp8.fake_quantize(x, "e4m3", 1.0)
    torch.testing.assert_close(ours, x.to(torch.float8_e4m3fn).float(), rtol=0, atol=0)


def test_fake_quantize_saturates_instead_of_overflowing():
    out = fp8.fake_quantize(torch.tensor([1e6, -1e6]), "e5m2", 1.0)
    assert out.tolist() == [57344.0, -57344.0]


def test_current_scaling_maps_amax_to_format_max():
    x = torch.tensor([0.001, -3.0, 0.5])
    out = fp8.current_scaling(x, "e4m3")
    assert out.abs().max() == pytest.approx(3.0)


def test_block_scaling_beats_one_scale_when_one_block_has_an_outlier():
    torch.manual_seed(0)
    x = torch.randn(4, 256) * 1e-3
    x[0, 0] = 1e3  # the first 1x128 block only
    per_tensor = fp8.tensor_relative_error(x[:, 128:], fp8.current_scaling(x, "e4m3")[:, 128:])
    per_block = fp8.tensor_relative_error(
        x[:, 128:], fp8.block_scaling(x, "e4m3", (1, 128))[:, 128:]
    )
    assert per_block < per_tensor


def test_block_scaling_rejects_shape_not_divisible():
    with pytest.raises(ValueError, match="must split into `block`"):
        fp8.block_scaling(torch.zeros(3, 100), "e4m3", (1, 128))


def test_delayed_scaling_uses_history_amax():
    scaler = fp8.DelayedScaling("e4m3", history=2)
    assert scaler.state == "EMPTY"
    scaler(torch.tensor([100.0]))
    assert scaler.state == "RECORDING"
    # scale from amax 100 maps 1.0 to 4.48, stored with E4M3's spacing there (0.5)
    small = scaler(torch.tensor([1.0]))
    assert small.item() == pytest.approx(
        fp8.fake_quantize(torch.tensor([1.0]), "e4m3", 4.48).item()
    )


def test_delayed_scaling_saturates_a_spike():
    scaler = fp8.DelayedScaling("e4m3", history=4)
    scaler(torch.tensor([1.0]))
    assert scaler(torch.tensor([10.0])).item() == pytest.approx(1.0)  # clipped at the old amax


def test_flushed_to_zero_counts_nonzero_elements_lost():
    x = torch.tensor([1.0, 1e-9, 0.0, 2.0])
    assert fp8.flushed_to_zero(x, fp8.fake_quantize(x, "e4m3", 1.0)) == pytest.approx(1 / 3)


def test_fp8_formats_are_the_float_formats_of_precision():
    assert get_format("e4m3") is FORMATS["float8_e4m3fn"]
    assert get_format("e5m2") is FORMATS["float8_e5m2"]
    assert fp8.decode(1, "e4m3") == fp8.values("e4m3")[1] == 2.0**-9


def test_tensor_relative_error_is_the_norm_of_the_difference():
    x, approx = torch.tensor([3.0, 4.0]), torch.tensor([3.0, 3.0])
    assert fp8.tensor_relative_error(x, approx) == pytest.approx(1 / 5)


NAN, INF = math.nan, math.inf


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: fp8.fake_quantize(torch.ones(2), "e3m4", 1.0), ValueError, "`fmt` must be one of"),
        (lambda: fp8.fake_quantize(torch.ones(2), "float16", 1.0), ValueError, "FP8 format"),
        (lambda: fp8.fake_quantize(torch.ones(2), None, 1.0), TypeError, "`fmt` must be a"),
        (lambda: fp8.fake_quantize(torch.ones(2), "e4m3", 0.0), ValueError, "`scale` must be"),
        (lambda: fp8.fake_quantize(torch.ones(2), "e4m3", NAN), ValueError, "`scale` must be"),
        (lambda: fp8.fake_quantize(torch.ones(2), "e4m3", "2"), TypeError, "`scale` must be"),
        (lambda: fp8.fake_quantize(torch.ones(2), "e4m3", torch.ones(3)), ValueError, "broadcast"),
        (lambda: fp8.fake_quantize([1.0], "e4m3", 1.0), TypeError, "`x` must be a torch.Tensor"),
        (
            lambda: fp8.fake_quantize(torch.ones(2, dtype=torch.int32), "e4m3", 1.0),
            TypeError,
            "`x` must be a floating-point",
        ),
        (lambda: fp8.current_scaling(torch.tensor([1e-6, 2e-6, NAN]), "e4m3"), ValueError, "`x`"),
        (lambda: fp8.current_scaling(torch.tensor([1.0, INF]), "e4m3"), ValueError, "`x` must"),
        (lambda: fp8.current_scaling(torch.ones(0), "e4m3"), ValueError, "at least one"),
        (lambda: fp8.block_scaling(torch.ones(2, 128), "e4m3", (0, 128)), ValueError, "block"),
        (lambda: fp8.block_scaling(torch.ones(2, 128), "e4m3", "ab"), TypeError, "`block`"),
        (lambda: fp8.block_scaling(torch.ones(2, 128), "e4m3", (1.5, 128)), TypeError, "block"),
        (lambda: fp8.block_scaling(torch.ones(256), "e4m3"), ValueError, "2 dimensions"),
        (lambda: fp8.DelayedScaling("e4m3", history=0), ValueError, "`history` must be"),
        (lambda: fp8.DelayedScaling("e4m3", history=2.5), TypeError, "`history` must be"),
        (lambda: fp8.DelayedScaling("e4m3")(torch.tensor([1.0, INF])), ValueError, "finite"),
        (lambda: fp8.DelayedScaling("e4m3")(None), TypeError, "DelayedScaling: `x`"),
        (lambda: fp8.decode(256, "e4m3"), ValueError, "`code` must be"),
        (lambda: fp8.decode(-1, "e4m3"), ValueError, "`code` must be"),
        (lambda: fp8.values("float16"), ValueError, "FP8 format"),
        (
            lambda: fp8.tensor_relative_error(torch.ones(3), torch.ones(2, 3)),
            ValueError,
            "same shape",
        ),
        (lambda: fp8.tensor_relative_error(torch.ones(0), torch.ones(0)), ValueError, "at least"),
        (lambda: fp8.flushed_to_zero(torch.ones(3), torch.zeros(1)), ValueError, "same shape"),
        (lambda: fp8.flushed_to_zero([1.0], [0.0]), TypeError, "`x` must be a torch.Tensor"),
    ],
)
def test_fp8_rejects_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
