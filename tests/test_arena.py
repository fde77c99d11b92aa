"""The arena's recipes (snippets/arena.py): the full recipe is train.py's stack at chapter 8's
scale, every other recipe is a set of Config changes that removes or swaps one technique of it,
and the runner holds the tokens per optimizer step fixed.

The snippet's sections run here without its races: the setup and recipes sections as written,
then the runner with a stand-in for train.train that records the Config it was given.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import sys

import pytest

from gradflow_site.labs import sections
from tests._site import ROOT

SNIPPET = ROOT / "snippets" / "arena.py"
TECHNIQUE = {  # which technique each Config field belongs to
    "warmup": "warmup",
    "max_norm": "clipping",
    "precision": "precision",
    "loss_scaling": "precision",
    "accum_steps": "accumulation",
    "checkpointing": "checkpointing",
}


@pytest.fixture(scope="module")
def arena():
    """The namespace of the snippet's setup and recipes sections, and its `run` function,
    whose train() returns a one-step log and records the Config in `seen`."""
    code = dict(sections(SNIPPET))
    spec = importlib.util.spec_from_file_location("train", ROOT / "snippets" / "train.py")
    train = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(train)
    namespace: dict = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "train", train)  # what the snippet's `from train import` finds
        exec(code["setup"] + "\n" + code["recipes"], namespace)
    seen = []

    def fake_train(cfg):
        seen.append(cfg)
        return {"log": [{"step": 0, "loss": 5.5, "val_loss": 5.4}]}

    exec(code["race"], namespace)
    namespace["train"] = fake_train
    namespace["seen"] = seen
    return namespace


def configs(arena) -> dict:
    """The Config each recipe trains with, as the runner builds it, seed 0."""
    out = {}
    for name in arena["RECIPES"]:
        arena["run"](arena["base"], name, 0)
        out[name] = arena["seen"][-1]
    return out


def test_recipes_change_only_config_fields(arena):
    fields = {f.name for f in dataclasses.fields(arena["Config"])}
    for name, changes in arena["RECIPES"].items():
        assert set(changes) <= fields, name


def test_recipes_change_one_technique_of_the_full_recipe_each(arena):
    for name, changes in arena["RECIPES"].items():
        techniques = {TECHNIQUE[field] for field in changes}
        assert len(techniques) == (0 if name == "full" else 1), (name, techniques)


def test_recipes_remove_warmup_and_clipping_and_swap_the_precision(arena):
    recipes = arena["RECIPES"]
    assert recipes["no-warmup"] == {"warmup": 0}
    assert recipes["no-clip"] == {"max_norm": 0.0}
    assert recipes["fp32"] == {"precision": "fp32"}
    assert recipes["bf16-pure"] == {"precision": "bf16-pure"}
    assert recipes["fp16"] == {"precision": "fp16"}
    assert recipes["fp16-no-scaler"] == {"precision": "fp16", "loss_scaling": False}
    assert recipes["accum"]["accum_steps"] > 1
    assert recipes["ckpt"] == {"checkpointing": "full"}


def test_base_is_chapter_8s_scale_with_the_scripts_stack(arena):
    base = arena["base"]
    assert (base.n_layers, base.hidden, base.n_heads) == (2, 64, 4)
    assert (base.micro_batch, base.seq_len, base.steps) == (16, 64, 300)
    assert base.weight_decay == 0.1 and base.max_norm == 1.0 and base.precision == "bf16"
    assert 0 < base.warmup < base.steps and base.loss_scaling
    assert base.accum_steps == 1 and base.checkpointing == "none"


def test_base_evaluates_on_the_last_step_only(arena):
    base = arena["base"]
    assert base.eval_every == base.steps


def test_run_holds_tokens_per_step_fixed(arena):
    base = arena["base"]
    for name, cfg in configs(arena).items():
        assert cfg.micro_batch * cfg.accum_steps == base.micro_batch, name
        assert cfg.seq_len == base.seq_len, name


def test_run_applies_the_recipe_and_the_seed(arena):
    arena["run"](arena["base"], "fp16-no-scaler", 2)
    cfg = arena["seen"][-1]
    assert cfg.seed == 2
    for field, value in arena["RECIPES"]["fp16-no-scaler"].items():
        assert getattr(cfg, field) == value, field


def test_run_returns_the_log(arena):
    assert arena["run"](arena["base"], "full", 0) == [{"step": 0, "loss": 5.5, "val_loss": 5.4}]
