"""The arena: deterministic runs, and every recipe really applies its technique."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch
from torch.testing import assert_close

from gradflow_ref.arena import (
    ARENA_ACTIVATIONS,
    RECIPES,
    ArenaConfig,
    Recipe,
    Run,
    make_task,
    race,
    train,
)

SMALL = ArenaConfig(depth=6, steps=6, eval_every=2)


def test_train_is_deterministic():
    first, second = train(SMALL, "full"), train(SMALL, "full")
    assert first.loss == second.loss
    assert first.grad_norm == second.grad_norm
    assert first.eval_loss == second.eval_loss


def test_train_seed_changes_the_run():
    assert train(SMALL, "baseline").loss != train(replace(SMALL, seed=1), "baseline").loss


def test_make_task_is_the_same_for_every_seed():
    _, x0, y0 = make_task(SMALL)
    _, x1, y1 = make_task(replace(SMALL, seed=3, depth=2))
    assert torch.equal(x0, x1) and torch.equal(y0, y1)


def test_train_checkpointing_matches_baseline_exactly():
    # recomputation re-runs the same CPU kernels on the same inputs: bit-identical results
    base, ckpt = train(SMALL, "baseline"), train(SMALL, "ckpt")
    assert ckpt.loss == base.loss
    assert ckpt.grad_norm == base.grad_norm
    assert ckpt.eval_loss == base.eval_loss


def test_train_accumulation_matches_the_big_batch():
    cfg = replace(SMALL, batch_size=4, accum_steps=4)
    accum = train(cfg, "accum")
    big = train(replace(cfg, batch_size=16), "baseline")
    assert accum.samples == big.samples == 16 * cfg.steps
    # float32: only the order of the sums differs
    assert_close(accum.loss, big.loss, rtol=1e-5, atol=0)
    assert_close(accum.grad_norm, big.grad_norm, rtol=1e-5, atol=0)
    assert_close(accum.eval_loss, big.eval_loss, rtol=1e-5, atol=0)


def test_train_clipping_caps_every_sgd_step_at_lr_times_max_norm():
    cfg = replace(SMALL, lr=1.0, steps=10)
    run = train(cfg, "clip")
    assert max(run.grad_norm) > 2 * cfg.max_norm, "the test needs gradients that get clipped"
    # plain SGD moves the weights by lr * clipped gradient, whose norm is min(norm, max_norm)
    expected = [cfg.lr * min(g, cfg.max_norm * g / (g + 1e-6)) for g in run.grad_norm]
    assert_close(run.update_norm, expected, rtol=1e-4, atol=0)
    assert max(run.update_norm) <= cfg.lr * cfg.max_norm * (1 + 1e-6)


def test_train_without_clipping_steps_by_lr_times_the_gradient_norm():
    run = train(replace(SMALL, lr=1.0, steps=10), "baseline")
    finite = [(u, g) for u, g in zip(run.update_norm, run.grad_norm) if math.isfinite(g)]
    assert_close([u for u, _ in finite], [g for _, g in finite], rtol=1e-4, atol=0)
    assert max(g for _, g in finite) > 2.0


def test_train_mixed_works_in_bf16_or_fp16_and_rounds():
    base = train(SMALL, "baseline")
    bf16, fp16 = train(SMALL, "mixed"), train(replace(SMALL, fp16=True), "mixed")
    assert (bf16.dtype, fp16.dtype, base.dtype) == (torch.bfloat16, torch.float16, torch.float32)
    # same weights rounded: the first loss agrees to the format's precision, but not exactly
    assert_close(bf16.loss[0], base.loss[0], rtol=2**-6, atol=0)
    assert_close(fp16.loss[0], base.loss[0], rtol=2**-9, atol=0)
    assert bf16.loss[0] != base.loss[0] and fp16.loss[0] != base.loss[0]


def test_train_loss_scaling_acts_only_in_fp16():
    assert set(train(SMALL, "full").loss_scale) == {1.0}
    scaled = train(replace(SMALL, fp16=True), "full")
    assert scaled.loss_scale[0] == 2.0**16
    assert set(train(replace(SMALL, fp16=True), "mixed").loss_scale) == {1.0}


def test_train_fp16_mode_leaves_fp32_recipes_unchanged():
    for name in ("baseline", "clip", "accum", "ckpt"):
        assert train(replace(SMALL, fp16=True), name).loss == train(SMALL, name).loss, name


def test_train_records_inf_nan_and_stops_a_dead_run():
    cfg = replace(SMALL, lr=1.0, steps=40)
    run = train(cfg, "baseline")
    assert run.status == "NaN/inf"
    assert run.dead_at is not None and len(run.loss) == run.dead_at + 1 < cfg.steps
    assert run.nonfinite[run.first_nonfinite] > 0 or not math.isfinite(run.loss[-1])
    assert train(cfg, "clip").status != "NaN/inf"


def test_train_zero_fraction_counts_exact_zero_gradients():
    # ReLU units that are off for the whole batch pass back exact zeros; tanh never does here
    relu = train(replace(SMALL, activation="relu", steps=1), "baseline")
    tanh = train(replace(SMALL, steps=1), "baseline")
    assert relu.zero_frac[0] > 0.01
    assert tanh.zero_frac[0] == 0


def test_train_adam_first_step_is_lr_per_coordinate_even_when_clipped():
    cfg = replace(SMALL, optimizer="adam", lr=0.01, steps=1)
    run = train(cfg, "clip")
    # Adam's first update is lr * g / (|g| + eps): about lr in every coordinate, whatever |g|
    assert_close(run.update_norm[0], cfg.lr * math.sqrt(run.n_params), rtol=1e-2, atol=0)


def test_race_runs_every_recipe_in_order():
    runs = race(replace(SMALL, steps=2))
    assert list(runs) == list(RECIPES)
    assert [r.name for r in runs.values()] == list(RECIPES)


def test_train_accepts_a_custom_recipe():
    run = train(SMALL, Recipe(clip=True, accumulate=True))
    assert run.name == "custom" and run.samples == SMALL.steps * 4 * SMALL.batch_size


@pytest.mark.parametrize(
    "field, value",
    [
        ("depth", 0),
        ("width", -1),
        ("batch_size", 1.5),
        ("steps", True),
        ("accum_steps", 0),
        ("eval_every", 0),
        ("lr", -0.1),
        ("lr", math.inf),
        ("max_norm", 0.0),
        ("segments", 99),
        ("optimizer", "rmsprop"),
        ("activation", "sigmoid"),
    ],
)
def test_arena_config_rejects_bad_values(field, value):
    with pytest.raises((TypeError, ValueError), match=f"ArenaConfig: `{field}` must be"):
        ArenaConfig(**{field: value})


def test_arena_config_rejects_a_non_number_learning_rate():
    with pytest.raises(TypeError, match="`lr` must be a number"):
        ArenaConfig(lr="0.1")


def test_train_rejects_an_unknown_recipe():
    with pytest.raises(ValueError, match="train: `recipe` must be one of 'baseline'"):
        train(SMALL, "adamw")
    with pytest.raises(TypeError, match="train: `recipe` must be a str or Recipe"):
        train(SMALL, 3)
    with pytest.raises(TypeError, match="train: `cfg` must be an? ArenaConfig"):
        train({"depth": 4}, "baseline")


def test_race_rejects_no_recipes():
    with pytest.raises(ValueError, match="race: `recipes` must name at least one recipe"):
        race(SMALL, [])


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: ArenaConfig(device=None), TypeError, "ArenaConfig: `device` must be a str"),
        (lambda: ArenaConfig(device="tpu9"), ValueError, "ArenaConfig: `device` must name"),
        (lambda: ArenaConfig(optimizer=None), ValueError, "ArenaConfig: `optimizer` must be one"),
        (lambda: ArenaConfig(seed=-1), ValueError, "ArenaConfig: `seed`"),
        (lambda: ArenaConfig(fp16="yes"), TypeError, "ArenaConfig: `fp16` must be True or False"),
        (lambda: Recipe(clip=None), TypeError, "Recipe: `clip` must be True or False"),
        (lambda: race(SMALL, None), TypeError, "race: `recipes` must be a list or tuple"),
        (lambda: race(SMALL, "clip"), TypeError, "race: `recipes` must be a list or tuple"),
        (lambda: race(SMALL, ["clip", "nope"]), ValueError, "race: `recipes` must be one of"),
        (lambda: race(SMALL, ["clip", "clip"]), ValueError, "race: `recipes` names a recipe twice"),
        (lambda: race(SMALL, [3]), ValueError, "race: `recipes` must be one of"),
        (lambda: Run(None, Recipe(), SMALL, torch.float32), TypeError, "Run: `name`"),
        (lambda: Run("x", Recipe(), SMALL, "float32"), TypeError, "Run: `dtype`"),
    ],
)
def test_arena_rejects_bad_input(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_arena_activations_are_flow_activations():
    from gradflow_ref.flow import ACTIVATIONS

    assert set(ARENA_ACTIVATIONS) <= set(ACTIVATIONS)
