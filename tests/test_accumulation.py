"""gradflow_ref.accumulation: micro-batches against one big batch, alone and under DDP."""

import math

import pytest
import torch

from gradflow_ref.accumulation import (
    TaskConfig,
    accumulate_grad_,
    big_batch_grad_,
    ddp_accumulate_,
    ddp_accumulation,
    divisor_bug_update_ratio,
    flat_grad,
    grad_accum_steps,
    gradient_noise,
    make_micro_batches,
    make_model,
    split_micro_batches,
)
from gradflow_ref.clipping import angle_between

# Accumulation only reorders a sum, so the gap is rounding: float64 ~1e-17, float32 ~1e-8 here.
TOL = {torch.float64: {"rtol": 1e-12, "atol": 1e-15}, torch.float32: {"rtol": 1e-5, "atol": 1e-6}}


def grads(fn, model, batches, **kwargs) -> torch.Tensor:
    fn(model, batches, **kwargs)
    return flat_grad(model).clone()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_accumulate_grad_matches_big_batch(dtype):
    cfg = TaskConfig(dtype=dtype)
    model = make_model(cfg)
    x, y = make_micro_batches([32], cfg)[0]
    big = grads(big_batch_grad_, model, [(x, y)])
    for accum_steps in (1, 2, 4, 8):
        micro = split_micro_batches(x, y, accum_steps)
        for normalization in ("global", "micro_mean"):  # equal counts: both are right
            accumulated = grads(accumulate_grad_, model, micro, normalization=normalization)
            torch.testing.assert_close(accumulated, big, **TOL[dtype])


def test_accumulate_grad_returns_the_big_batch_loss():
    model, micro = make_model(), make_micro_batches([3, 9, 4])
    loss = accumulate_grad_(model, micro)
    torch.testing.assert_close(loss, big_batch_grad_(model, micro), **TOL[torch.float64])


def test_accumulate_grad_without_divisor_is_accum_steps_times_too_large():
    model = make_model()
    for accum_steps in (2, 4, 8):
        micro = make_micro_batches([8] * accum_steps, seed=accum_steps)
        wrong = grads(accumulate_grad_, model, micro, normalization="none")
        right = grads(big_batch_grad_, model, micro)
        torch.testing.assert_close(wrong, accum_steps * right, **TOL[torch.float64])


def test_accumulate_grad_global_normalization_matches_big_batch_with_unequal_tokens():
    model, micro = make_model(), make_micro_batches([2, 30, 5, 27])
    torch.testing.assert_close(
        grads(accumulate_grad_, model, micro, normalization="global"),
        grads(big_batch_grad_, model, micro),
        **TOL[torch.float64],
    )


def test_accumulate_grad_micro_mean_is_wrong_with_unequal_tokens():
    model, micro = make_model(), make_micro_batches([2, 30, 5, 27])
    naive = grads(accumulate_grad_, model, micro, normalization="micro_mean")
    right = grads(big_batch_grad_, model, micro)
    # the 2-token micro-batch weighs as much as the 30-token one: far off, not rounding
    assert (torch.linalg.vector_norm(naive - right) / torch.linalg.vector_norm(right)) > 0.1


def test_accumulate_grad_clip_once_matches_clipped_big_batch():
    model, micro = make_model(), make_micro_batches([8] * 4)
    once = grads(accumulate_grad_, model, micro, max_norm=0.1, clip="once")
    big = grads(big_batch_grad_, model, micro, max_norm=0.1)
    torch.testing.assert_close(once, big, **TOL[torch.float64])
    assert torch.linalg.vector_norm(once).item() == pytest.approx(0.1, rel=1e-5)


def test_accumulate_grad_clip_each_micro_step_differs_from_clip_once():
    model, micro = make_model(), make_micro_batches([8] * 4)
    assert grads(big_batch_grad_, model, micro).norm() > 0.1  # clipping is active
    once = grads(accumulate_grad_, model, micro, max_norm=0.1, clip="once")
    each = grads(accumulate_grad_, model, micro, max_norm=0.1, clip="each")
    assert angle_between(once, each) > 5.0


def test_accumulate_grad_rejects_empty_micro_batch():
    model, micro = make_model(), make_micro_batches([4, 4])
    micro.insert(1, (micro[0][0][:0], micro[0][1][:0]))
    with pytest.raises(ValueError, match=r"`micro_batches\[1\]` must hold >= 1 token"):
        accumulate_grad_(model, micro)


def test_accumulate_grad_rejects_no_micro_batches():
    with pytest.raises(ValueError, match="accumulation steps >= 1"):
        accumulate_grad_(make_model(), [])


def test_accumulate_grad_rejects_unknown_options():
    model, micro = make_model(), make_micro_batches([4])
    with pytest.raises(ValueError, match="`normalization` must be one of"):
        accumulate_grad_(model, micro, normalization="mean")
    with pytest.raises(ValueError, match="`clip` must be 'once' or 'each'"):
        accumulate_grad_(model, micro, max_norm=1.0, clip="never")


@pytest.mark.parametrize("accum_steps", [0, -2, 33, 2.0])
def test_split_micro_batches_rejects_bad_accum_steps(accum_steps):
    x, y = make_micro_batches([32])[0]
    with pytest.raises(ValueError, match="`accum_steps` must be an int from 1 to"):
        split_micro_batches(x, y, accum_steps)


def test_make_micro_batches_rejects_empty_micro_batch():
    with pytest.raises(ValueError, match="every entry of `token_counts` must be from 1"):
        make_micro_batches([4, 0])


def test_grad_accum_steps_nanogpt_arithmetic():
    assert grad_accum_steps(524288, 64, 1024, world_size=8) == 1  # 8 GPUs: no accumulation
    assert grad_accum_steps(524288, 64, 1024, world_size=1) == 8  # one GPU: 8 micro-steps
    assert grad_accum_steps(2**19, 16, 1024, world_size=2) == 16


@pytest.mark.parametrize("args", [(524288, 64, 1024, 3), (1000, 64, 1024, 1)])
def test_grad_accum_steps_rejects_indivisible_total(args):
    with pytest.raises(ValueError, match="`total_batch_size` must be a multiple"):
        grad_accum_steps(*args)


def test_grad_accum_steps_rejects_world_size_below_one():
    with pytest.raises(ValueError, match="`world_size` must be an integer from 1"):
        grad_accum_steps(524288, 64, 1024, world_size=0)


def test_divisor_bug_update_ratio_is_accum_steps_under_sgd():
    assert divisor_bug_update_ratio("sgd", accum_steps=8) == pytest.approx(8.0, rel=1e-12)


def test_divisor_bug_update_ratio_is_near_one_under_adamw():
    # Adam divides by sqrt(v): scaling every gradient by 8 leaves the update almost unchanged
    assert divisor_bug_update_ratio("adamw", accum_steps=8) == pytest.approx(1.0, abs=1e-3)
    assert divisor_bug_update_ratio("adamw", accum_steps=8, steps=5) == pytest.approx(1.0, abs=1e-3)


def test_divisor_bug_update_ratio_is_capped_by_clipping_under_sgd():
    assert divisor_bug_update_ratio("sgd", accum_steps=8, max_norm=1.0) < 8.0 - 1.0


def test_gradient_noise_falls_as_inverse_sqrt_of_micro_batches():
    curve = gradient_noise(ns=(1, 4, 16), n_seeds=12)
    slope = (math.log(curve.rel_error[-1]) - math.log(curve.rel_error[0])) / math.log(16)
    assert slope == pytest.approx(-0.5, abs=0.1)


def test_gradient_noise_rejects_bad_arguments():
    with pytest.raises(ValueError, match="`ns` must be from 1"):
        gradient_noise(ns=(0, 2))


@pytest.fixture(scope="module")
def ddp_result():
    return ddp_accumulation(world_size=2, accum_steps=4, timeout_s=120.0)  # a hang guard only


def test_ddp_accumulation_matches_single_process_big_batch(ddp_result):
    assert ddp_result.max_abs_diff < 1e-15  # float64 model, 64 tokens
    assert ddp_result.max_abs_diff_sync_every_step < 1e-15
    assert ddp_result.rank_disagreement == 0.0


def test_ddp_accumulation_no_sync_saves_all_but_one_allreduce(ddp_result):
    assert ddp_result.allreduces_no_sync == 1
    assert ddp_result.allreduces_sync_every_step == 4
    assert ddp_result.allreduces_saved == 3


def test_ddp_accumulation_ranks_warn_nothing(ddp_result):
    assert ddp_result.warnings == []


def test_ddp_accumulation_rejects_accum_steps_below_one():
    with pytest.raises(ValueError, match="`accum_steps` must be an integer from 1"):
        ddp_accumulation(accum_steps=0)


def test_ddp_accumulate_rejects_unknown_sync():
    with pytest.raises(ValueError, match="`sync` must be 'last' or 'every', got 'never'"):
        ddp_accumulate_(make_model(), make_micro_batches([4]), sync="never")
