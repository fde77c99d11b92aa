"""gradflow_ref.fp8: formats decoded from the bits against torch's float8 dtypes, and scaling."""

from __future__ import annotations

import math

import pytest
import torch

from gradflow_ref import fp8
from gradflow_ref.fp8 import FORMATS


@pytest.mark.parametrize("name", list(FORMATS))
def test_decode_matches_torch_float8_for_every_code(name):
    fmt = FORMATS[name]
    theirs = torch.arange(256, dtype=torch.uint8).view(fmt.dtype).float().tolist()
    for code, (ours, ref) in enumerate(zip(fp8.values(fmt), theirs)):
        assert ours == ref or (math.isnan(ours) and math.isnan(ref)), code


@pytest.mark.parametrize("name", list(FORMATS))
def test_format_limits_match_torch_finfo(name):
    fmt, info = FORMATS[name], torch.finfo(FORMATS[name].dtype)
    assert fmt.max == info.max
    assert fmt.min_normal == info.tiny
    assert fmt.spacing_at_one == info.eps
    assert fmt.min_subnormal == fmt.min_normal * 2.0**-fmt.mantissa_bits


def test_e4m3_has_no_inf_and_e5m2_has():
    assert not any(math.isinf(v) for v in fp8.values(FORMATS["e4m3"]))
    assert sum(math.isinf(v) for v in fp8.values(FORMATS["e5m2"])) == 2


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
    per_tensor = fp8.relative_error(x[:, 128:], fp8.current_scaling(x, "e4m3")[:, 128:])
    per_block = fp8.relative_error(x[:, 128:], fp8.block_scaling(x, "e4m3", (1, 128))[:, 128:])
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


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: fp8.fake_quantize(torch.ones(2), "e3m4", 1.0), ValueError, "`fmt` must be one of"),
        (lambda: fp8.fake_quantize(torch.ones(2), "e4m3", 0.0), ValueError, "`scale` must be"),
        (lambda: fp8.fake_quantize([1.0], "e4m3", 1.0), TypeError, "`x` must be a floating"),
        (lambda: fp8.DelayedScaling("e4m3", history=0), ValueError, "`history` must be"),
        (lambda: fp8.decode(256, FORMATS["e4m3"]), ValueError, "`code` must be"),
    ],
)
def test_fp8_rejects_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()
