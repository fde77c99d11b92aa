"""The datasheet module: figures as the datasheets print them, ridge points, clear errors."""

from __future__ import annotations

import pytest

from gradflow_ref import hardware
from gradflow_ref.hardware import GPUS, peak_flops, ridge_point


@pytest.mark.parametrize(
    ("name", "dtype", "sparse_tflops"),
    [
        # the "with sparsity" figures as the datasheets print them
        ("A100 80GB SXM", "bf16", 624),
        ("A100 80GB SXM", "tf32", 312),
        ("H100 SXM", "bf16", 1979),
        ("H100 SXM", "tf32", 989),
        ("H100 SXM", "fp8", 3958),
        ("H200 SXM", "fp8", 3958),
    ],
)
def test_peak_flops_sparse_matches_the_datasheet(name, dtype, sparse_tflops):
    assert peak_flops(name, dtype, sparse=True) / 1e12 == pytest.approx(sparse_tflops, abs=0.5)


def test_peak_flops_sparse_is_twice_dense():
    for name, card in GPUS.items():
        for dtype in set(card.tflops) & hardware._SPARSE:
            assert peak_flops(name, dtype, sparse=True) == 2 * peak_flops(name, dtype)


def test_ridge_point_is_peak_over_bandwidth():
    assert ridge_point("A100 80GB SXM", "bf16") == pytest.approx(312e12 / 2039e9)
    assert ridge_point("H100 SXM", "bf16") == pytest.approx(989.5e12 / 3.35e12)


def test_every_gpu_names_its_source():
    assert all(card.source.startswith("https://") for card in GPUS.values())


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        (("B200", "bf16"), {}, ValueError, "`name` must be one of"),
        ((None, "bf16"), {}, TypeError, "`name` must be a string"),
        (("H100 SXM", "int4"), {}, ValueError, "`dtype` must be one of"),
        (("A100 80GB SXM", "fp8"), {}, ValueError, "lists no fp8 figure"),
        (("H100 SXM", "fp32"), {"sparse": True}, ValueError, "2:4-sparse figures only"),
        (("H100 SXM", "fp64_tensor"), {"sparse": True}, ValueError, "2:4-sparse figures only"),
    ],
)
def test_peak_flops_rejects_bad_input(args, kwargs, error, message):
    with pytest.raises(error, match=message):
        peak_flops(*args, **kwargs)


def test_on_chip_covers_every_gpu_and_names_sources():
    assert set(hardware.ON_CHIP) == set(GPUS)
    for card in hardware.ON_CHIP.values():
        if card is None:
            continue
        assert card.source.startswith("https://developer.nvidia.com/")
        assert card.shared_max_kib_per_sm < card.l1_shared_kib_per_sm
        assert (card.sram_bytes_per_s is None) == (card.sram_bandwidth_source == "")


def test_on_chip_sizes_as_the_articles_print_them():
    a100, h100 = hardware.on_chip("A100 80GB SXM"), hardware.on_chip("H100 SXM")
    assert (a100.sms, a100.l1_shared_kib_per_sm, a100.l2_mib) == (108, 192, 40)
    assert (h100.sms, h100.l1_shared_kib_per_sm, h100.l2_mib) == (132, 256, 50)
    assert a100.sram_kib == 108 * 192


def test_on_chip_says_none_where_nothing_is_published():
    assert hardware.on_chip("H200 SXM") is None


def test_on_chip_rejects_unknown_gpu():
    with pytest.raises(ValueError, match="`name` must be one of"):
        hardware.on_chip("B200")


def test_on_chip_l2_bandwidth_is_the_ampere_articles_bytes_per_clock_at_boost():
    a100 = hardware.on_chip("A100 80GB SXM")
    assert a100.l2_bytes_per_s == pytest.approx(5120 * 1410e6)
    assert hardware.on_chip("H100 SXM").l2_bytes_per_s is None


def test_on_chip_a100_registers_outsize_its_l1():
    a100 = hardware.on_chip("A100 80GB SXM")
    assert a100.register_kib_per_sm > a100.l1_shared_kib_per_sm > a100.shared_max_kib_per_sm
