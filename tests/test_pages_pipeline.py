"""Builders of docs/pipeline.md (gradflow_site/pages/pipeline.py)."""

from __future__ import annotations

import html
import json
import re

import pytest
import torch
from torch import nn

from gradflow_ref.pipeline import STEP_PHASES, PipelineConfig, Trainer, trace_step
from gradflow_site.pages import pipeline as page
from tests._site import ROOT

SHAPE = dict(n_params=7_000_000_000, n_layers=32, hidden=4096, n_heads=32, seq_len=4096)
SHAPE |= dict(micro_batch=1, vocab=32000, dropout=False, stores_scores=False)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def tiny_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 8), nn.GELU(), nn.Linear(8, 8), nn.GELU(), nn.Linear(8, 3))


def tiny_batch_maker(gen):
    def make_batch():
        x = torch.randn(5, 6, generator=gen)
        return x, torch.randint(0, 3, (5,), generator=gen)

    return make_batch


def widget_data(markup: str) -> dict:
    found = re.search(r'data-gf-data="([^"]*)"', markup)
    assert found, "no widget data in the markup"
    return json.loads(html.unescape(found.group(1)))


def test_trace_combinations_match_trace_step():
    gen = torch.Generator().manual_seed(0)
    combos = page.trace_combinations(tiny_model, tiny_batch_maker(gen), n_micro=2, segments=2)
    assert sorted(combos) == sorted(
        f"{p}-{a}-{c}" for p in ("bf16", "fp16") for a in (0, 1) for c in (0, 1)
    )
    for key, combo in combos.items():
        precision, accumulate, checkpointed = key.split("-")
        dtype = torch.float16 if precision == "fp16" else torch.bfloat16
        trainer = Trainer(
            tiny_model(), PipelineConfig(dtype=dtype, segments=2 if int(checkpointed) else 1)
        )
        batches = [tiny_batch_maker(gen)() for _ in range(2 if int(accumulate) else 1)]
        _, stages = trace_step(trainer, batches)
        kept = [s for s in stages if s.micro_batch in (0, None)]
        assert [s[:3] for s in combo["stages"]] == [
            [s.name, s.dtype, int(s.micro_batch is not None)] for s in kept
        ], key
        assert combo["micro"] == len(batches)
        names = [s[0] for s in combo["stages"]]
        assert ("scale" in names) == (precision == "fp16")
        assert ("recompute" in names) == bool(int(checkpointed))
        assert all(text for _, _, _, text in combo["stages"])


def test_stage_notes_in_the_chapter_describe_every_traced_stage():
    # the widget reads what it says about each stage from this Markdown table (prose lives in
    # the chapter): one row per stage trace_step records, each with a name and two sentences
    text = (ROOT / "docs" / "pipeline.md").read_text(encoding="utf-8")
    notes = text.split('<div class="gf-stage-notes" markdown>', 1)[1].split("</div>", 1)[0]
    rows = [r for r in notes.splitlines() if r.startswith("| `")]
    cells = [[c.strip() for c in r.strip("|").split(" | ")] for r in rows]
    assert [c[0].strip("`") for c in cells] == list(STEP_PHASES)
    assert all(len(c) == 4 and all(c) for c in cells), cells


def test_stage_widget_leaves_the_random_state_as_it_was():
    gen = torch.Generator().manual_seed(7)
    torch.manual_seed(11)
    before_gen, before_global = gen.get_state(), torch.random.get_rng_state()
    markup = page.stage_widget(tiny_model, tiny_batch_maker(gen), gen, n_micro=3)
    assert torch.equal(gen.get_state(), before_gen)
    assert torch.equal(torch.random.get_rng_state(), before_global)
    data = widget_data(markup)
    assert "info" not in data and data["segments"] == 3  # the stage prose is in the chapter
    assert len(data["combos"]) == 8


def test_scaler_calls_returns_torchs_message_for_a_second_unscale():
    scaler, w = torch.amp.GradScaler("cpu"), nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([w], lr=0.1)
    scaler.scale(w.sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError) as err:
        scaler.unscale_(opt)
    assert page.scaler_calls(["backward", "unscale_", "backward", "unscale_"]) == str(err.value)


def test_scaler_calls_shows_update_before_step_unscaling_twice():
    assert page.scaler_calls(["backward", "unscale_", "step", "update"], scale=8.0) == 1.0
    assert page.scaler_calls(["backward", "unscale_", "update", "step"], scale=8.0) == 1 / 8


def test_scaler_calls_rejects_an_unknown_call():
    with pytest.raises(ValueError, match="`calls` must be drawn from"):
        page.scaler_calls(["backward", "clip"])


@pytest.mark.parametrize("weight", [0.02, 1.0, 3.0, -0.02, 1e-3])
def test_bf16_spacing_is_the_gap_to_the_next_bf16_number(weight):
    gap = page.bf16_spacing(weight)
    up = torch.tensor(abs(weight), dtype=torch.bfloat16)  # the BF16 number nearest the weight
    assert float(up + torch.tensor(0.49 * gap, dtype=torch.bfloat16)) == float(up)
    assert float(up + torch.tensor(0.51 * gap, dtype=torch.bfloat16)) > float(up)


def test_bf16_spacing_rejects_zero():
    with pytest.raises(ValueError, match="`weight` must be finite and nonzero"):
        page.bf16_spacing(0.0)


def test_spread_gives_lowest_and_highest():
    assert page.spread([1.296, 1.291, 1.293]) == "1.291–1.296"
    assert page.spread([0.5]) == "0.500"


def _sections(*names) -> dict:
    """Run the named sections of snippets/pipeline.py, in order, in one namespace."""
    text = (ROOT / "snippets" / "pipeline.py").read_text(encoding="utf-8")
    ns: dict = {}
    for name in names:
        body = text.split(f"# --8<-- [start:{name}]", 1)[1].split(f"# --8<-- [end:{name}]")[0]
        exec(compile(body, f"snippets/pipeline.py:{name}", "exec"), ns)
    return ns


@pytest.fixture(scope="module")
def ordering():
    """The chapter's four ordering bugs, run as the page runs them (a few seconds)."""
    return _sections("imports", "step_with_bug", "ordering_bugs")


def test_step_with_bug_none_is_trainer_step(ordering):
    ns = ordering
    for dtype in (torch.bfloat16, torch.float16):
        trainers = []
        for step in (ns["step_with_bug"], None):
            ns["gen"].manual_seed(3)
            cfg = PipelineConfig(1e-2, 1e-3, 2, 8, max_norm=0.1, dtype=dtype, segments=3)
            cfg.init_scale = 2.0**20
            trainer = Trainer(ns["make_model"](), cfg)
            for _ in range(3):
                micro = [ns["make_batch"](16) for _ in range(3)]
                step(trainer, micro) if step else trainer.step(micro)
            trainers.append(trainer)
        ours, reference = (t.master.params for t in trainers)
        torch.testing.assert_close(ours, reference, rtol=1e-6, atol=1e-7)  # torch's clip vs ours


@pytest.mark.parametrize("bug", ["clip_scaled", "clip_per_micro", "schedule_on_skip", "no_zero"])
def test_ordering_bug_moves_the_master_weights(ordering, bug):
    assert ordering["gaps"][bug] > 1e-3


def test_ordering_bug_clip_scaled_clips_a_norm_times_the_loss_scale(ordering):
    good, bad = ordering["bug_runs"]["clip_scaled"]
    # of the order of the scale times the true norm (the two runs' weights differ by then)
    ratio = bad[-1].grad_norm / good[-1].grad_norm / bad[-2].scale
    assert 0.5 < ratio < 2


def test_ordering_bug_schedule_on_skip_runs_the_schedule_ahead(ordering):
    good, bad = ordering["bug_runs"]["schedule_on_skip"]
    assert good[0].skipped and bad[0].skipped
    assert bad[-1].lr != good[-1].lr


def test_ordering_bug_no_zero_adds_the_old_gradients(ordering):
    good, bad = ordering["bug_runs"]["no_zero"]
    assert bad[-1].grad_norm > good[-1].grad_norm
