"""gradflow_ref.roofline: matmul bounds, attention IO counts, peak tensor bytes."""

from __future__ import annotations

import pytest
import torch

from gradflow_ref import roofline
from gradflow_ref.hardware import GPUS, peak_flops, ridge_point
from gradflow_ref.roofline import Matmul, matmul_bound


def test_matmul_counts_flops_and_bytes():
    mm = Matmul(2, 3, 4, dtype_bytes=2)
    assert mm.flops == 2 * 2 * 3 * 4
    assert mm.bytes == (2 * 4 + 4 * 3 + 2 * 3) * 2
    assert mm.intensity == pytest.approx(48 / 52)


def test_matmul_bound_flops_match_torch_matmul_count():
    # torch's flop counter counts 2 M N K for a matmul, as Matmul.flops does
    from torch.utils.flop_counter import FlopCounterMode

    a, b = torch.randn(8, 16), torch.randn(16, 4)
    with FlopCounterMode(display=False) as counter:
        a @ b
    assert counter.get_total_flops() == Matmul(8, 4, 16).flops


def test_matmul_bound_is_max_of_compute_and_memory_time():
    mm = Matmul(4096, 11008, 4096)
    b = matmul_bound(mm, "H100 SXM", "bf16")
    assert b.compute_s == pytest.approx(mm.flops / peak_flops("H100 SXM", "bf16"))
    assert b.memory_s == pytest.approx(mm.bytes / GPUS["H100 SXM"].memory_bytes_per_s)
    assert b.time_s == max(b.compute_s, b.memory_s)
    assert b.ridge == pytest.approx(ridge_point("H100 SXM", "bf16"))


@pytest.mark.parametrize("name", list(GPUS))
def test_matmul_bound_switches_at_the_ridge_point(name):
    low = matmul_bound(Matmul(1, 11008, 4096), name)
    high = matmul_bound(Matmul(8192, 8192, 8192), name)
    assert low.intensity < low.ridge and low.bound == "memory"
    assert low.attainable_flops == pytest.approx(GPUS[name].memory_bytes_per_s * low.intensity)
    assert high.intensity > high.ridge and high.bound == "compute"
    assert high.attainable_flops == peak_flops(name, "bf16")


def test_matmul_bound_sparse_halves_compute_time():
    mm = Matmul(8192, 8192, 8192)
    dense, sparse = (
        matmul_bound(mm, "A100 80GB SXM"),
        matmul_bound(mm, "A100 80GB SXM", sparse=True),
    )
    assert sparse.compute_s == pytest.approx(dense.compute_s / 2)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"m": 0, "n": 1, "k": 1}, ValueError, "`m` must be at least 1"),
        ({"m": 1, "n": 2.0, "k": 1}, TypeError, "`n` must be an int"),
        (
            {"m": 1, "n": 1, "k": 1, "dtype_bytes": 0},
            ValueError,
            "`dtype_bytes` must be at least 1",
        ),
    ],
)
def test_matmul_rejects_bad_shapes(kwargs, error, message):
    with pytest.raises(error, match=message):
        Matmul(**kwargs)


def test_matmul_bound_rejects_non_matmul():
    with pytest.raises(TypeError, match="`mm` must be a Matmul"):
        matmul_bound((1, 2, 3), "H100 SXM")


def test_attention_hbm_bytes_counts_algorithm_0():
    n, d = 1024, 64
    assert roofline.attention_hbm_bytes(n, d, 2) == (4 * n * d + 4 * n * n) * 2


def test_flash_attention_hbm_bytes_follows_theorem_2_order():
    # doubling N quadruples the traffic once the N^2 d^2 / M term dominates; doubling M halves it
    n, d, m = 16384, 64, 192 * 1024
    base = roofline.flash_attention_hbm_bytes(n, d, m)
    assert roofline.flash_attention_hbm_bytes(2 * n, d, m) / base == pytest.approx(4, rel=0.05)
    assert roofline.flash_attention_hbm_bytes(n, d, 2 * m) / base == pytest.approx(0.5, rel=0.1)


def test_flash_attention_moves_fewer_bytes_than_standard_at_long_sequences():
    for n in (1024, 4096, 16384):
        assert roofline.flash_attention_hbm_bytes(n, 64, 192 * 1024) < roofline.attention_hbm_bytes(
            n, 64
        )


def test_flash_attention_rejects_tiny_sram():
    with pytest.raises(ValueError, match="`sram_bytes` must hold at least"):
        roofline.flash_attention_hbm_bytes(1024, 64, 100)


def test_attention_rejects_non_positive_length():
    with pytest.raises(ValueError, match="`seq_len` must be an integer from 1"):
        roofline.attention_hbm_bytes(0, 64)


def test_training_days_divides_budget_by_sustained_flops():
    days = roofline.training_days(3.14e23, "H100 SXM", "bf16", 0.4)
    assert days == pytest.approx(3.14e23 / (989.5e12 * 0.4) / 86400)


@pytest.mark.parametrize(("flops", "mfu"), [(-1.0, 0.4), (1e20, 0.0), (1e20, 1.5)])
def test_training_days_rejects_bad_input(flops, mfu):
    with pytest.raises(ValueError, match="must be"):
        roofline.training_days(flops, "H100 SXM", mfu=mfu)


def test_peak_tensor_bytes_counts_live_outputs_not_views():
    x = torch.zeros(1000)
    assert roofline.peak_tensor_bytes(lambda t: t.view(10, 100).t(), x) == 0
    # y and z alive together: two 4000-byte storages
    assert roofline.peak_tensor_bytes(lambda t: (t + 1) * 2, x) == 8000


def test_peak_tensor_bytes_sees_the_attention_matrix():
    q = torch.randn(1, 1, 256, 16)
    naive = roofline.peak_tensor_bytes(lambda a: (a @ a.transpose(-2, -1)).softmax(-1) @ a, q)
    assert naive >= 2 * 256 * 256 * 4  # scores and probabilities alive together


def test_peak_tensor_bytes_rejects_non_callable():
    with pytest.raises(TypeError, match="`fn` must be callable"):
        roofline.peak_tensor_bytes(3)
