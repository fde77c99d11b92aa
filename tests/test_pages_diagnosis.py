"""Builders of docs/diagnosis.md (gradflow_site/pages/diagnosis.py): the side-by-side trainer held
against a plain loop with torch.optim.AdamW, its remedies, and the table and widget data.

The side-by-side runs go through torch.func.vmap, whose batched kernels sum in another order than
the plain loop's: losses and norms agree to rtol 1e-4 over a few steps. The FP16 runs are a plain
loop already (fp16_runs).
"""

from __future__ import annotations

import copy
import json

import pytest
import torch
import torch.nn.functional as F

from gradflow_ref.transformer import Transformer, TransformerConfig, get_batch, shakespeare
from gradflow_site.pages import diagnosis as page

CFG = TransformerConfig(seq_len=16)


def plain_loop(seed: int, steps: int, lr: float = 1e-2, warmup: int = 5):
    """The loop the page shows: torch.optim.AdamW, clip_grad_norm_ at 1.0, linear warmup."""
    torch.manual_seed(seed)
    model = Transformer(CFG)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=page.BETAS, weight_decay=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warmup))
    gen, losses, norms = torch.Generator().manual_seed(0), [], []
    for _ in range(steps):
        x, y = get_batch(shakespeare(), 8, 16, gen)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0).item())
        opt.step()
        sched.step()
        losses.append(loss.item())
    return torch.tensor(losses), torch.tensor(norms)


def test_train_runs_matches_a_plain_adamw_loop():
    runs, log = page.train_runs([page.Setting()], (0, 1), 6, CFG)
    for row, seed in enumerate((0, 1)):
        losses, norms = plain_loop(seed, 6)
        torch.testing.assert_close(log["loss"][row], losses, rtol=1e-4, atol=0)
        torch.testing.assert_close(log["norm"][row], norms, rtol=1e-4, atol=0)


def test_train_runs_missing_divisor_multiplies_the_first_norm_by_four():
    _, log = page.train_runs([page.Setting(), page.Setting(loss_mult=4.0)], (0,), 1, CFG)
    assert log["norm"][1, 0].item() == pytest.approx(4 * log["norm"][0, 0].item(), rel=1e-5)


def test_train_runs_skip_leaves_the_weights_of_a_corrupt_step():
    setting = page.Setting(corrupt=(6,), skip_over=3.0)
    _, log = page.train_runs([setting], (0,), 7, CFG)
    assert log["skipped"][0].tolist() == [0, 0, 0, 0, 0, 0, 1]
    assert log["ratio"][0, 6].item() == 0.0


def test_train_runs_rollback_fires_and_cuts_the_learning_rate():
    _, log = page.train_runs([page.Setting(lr=1.0, warmup=8, rollback=True)], (0,), 12, CFG)
    fired = int(log["rolled_back"][0].argmax())
    assert log["rolled_back"][0].sum() >= 1
    assert log["lr"][0, fired + 1] < log["lr"][0, fired]


def guarded_loop(seed: int, steps: int, lr: float = 1.0, warmup: int = 8):
    """The page's guarded_run: checkpoint every 5 steps, roll back and cut the lr on a spike."""
    torch.manual_seed(seed)
    model = Transformer(CFG)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=page.BETAS, weight_decay=0.1)
    gen, best, cut, losses = torch.Generator().manual_seed(0), float("inf"), 1.0, []
    for step in range(steps):
        if step % page.CHECKPOINT_EVERY == 0:
            saved = copy.deepcopy({"model": model.state_dict(), "opt": opt.state_dict()})
        opt.param_groups[0]["lr"] = lr * cut * min(1.0, (step + 1) / warmup)
        x, y = get_batch(shakespeare(), 8, 16, gen)
        loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
        losses.append(loss.item())
        if not loss.item() <= 1.5 * best:
            model.load_state_dict(saved["model"])
            opt.load_state_dict(saved["opt"])
            cut /= 10
            continue
        best = min(best, loss.item())
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    return torch.tensor(losses)


def test_train_runs_rollback_matches_a_plain_checkpoint_loop():
    setting = page.Setting(lr=1.0, warmup=8, rollback=True)
    _, log = page.train_runs([setting], (0,), 8, CFG)
    torch.testing.assert_close(log["loss"][0], guarded_loop(0, 8), rtol=1e-4, atol=0)


def test_fp16_runs_gradscaler_skips_and_halves_on_overflow():
    setting = page.Setting(fp16=True, loss_scale=2.0**30, dynamic=True)
    _, log = page.fp16_runs([setting], (0,), 2, CFG)
    assert log["skipped"][0, 0] == 1
    assert log["scale"][0].tolist() == [2.0**30, 2.0**29]


def test_fp16_runs_fixed_scale_overflow_turns_the_loss_nan():
    setting = page.Setting(fp16=True, loss_scale=2.0**30)
    _, log = page.fp16_runs([setting], (0,), 2, CFG)
    assert log["loss"][0].isnan().tolist() == [False, True]


def test_fp16_runs_rejects_fp32_settings():
    with pytest.raises(ValueError, match="every setting must have fp16=True"):
        page.fp16_runs([page.Setting()], (0,), 1, CFG)


def test_train_runs_rejects_fp16_settings():
    with pytest.raises(ValueError, match="FP16 settings train in fp16_runs"):
        page.train_runs([page.Setting(fp16=True)], (0,), 1, CFG)


def test_train_runs_rejects_settings_of_two_kinds():
    with pytest.raises(ValueError, match="must share qk_norm"):
        page.train_runs([page.Setting(), page.Setting(qk_norm=True)], (0,), 1, CFG)


def test_train_runs_rejects_zero_steps():
    with pytest.raises(ValueError, match="`steps` must be a positive integer, got 0"):
        page.train_runs([page.Setting()], (0,), 0, CFG)


def fake_runs(steps: int = 4) -> dict:
    """Runs of the gallery's shape with made-up numbers (3 seeds)."""
    log = {k: torch.rand(3, steps) + 1 for k in (*page.SIGNALS, "skipped", "clipped", "lr")}
    log["rolled_back"] = torch.zeros(3, steps)
    return {name: {"fail": log, "fix": log} for name in page.FAILURES}


def test_summary_rejects_runs_without_every_failure():
    runs = fake_runs()
    del runs["FP16 overflow"]
    with pytest.raises(ValueError, match="`runs` has no \\['FP16 overflow'\\]"):
        page.summary(runs)


def test_spread_gives_median_lowest_and_highest():
    assert page.spread(torch.tensor([3.0, 1.0, 2.0])) == "2 (1–3)"


def test_spread_counts_nan_seeds():
    assert page.spread(torch.tensor([float("nan"), 1.0, 2.0])) == "NaN in 1 of 3"


def test_check_claims_names_a_pattern_that_no_longer_holds():
    with pytest.raises(ValueError, match="learning rate too high"):
        page.check_claims(page.summary(fake_runs()))


def test_static_table_has_a_row_per_failure_and_remedy():
    html = page.static_table(fake_runs())
    assert html.count("<tr>") == 2 * len(page.FAILURES) + 1


def test_widget_data_writes_nan_as_null():
    runs = fake_runs()
    runs["FP16 overflow"]["fail"] = {k: v.clone() for k, v in runs["FP16 overflow"]["fail"].items()}
    runs["FP16 overflow"]["fail"]["loss"][0, 2] = float("nan")
    data = json.loads(json.dumps(page.widget_data(runs), allow_nan=False))
    fp16 = next(f for f in data["failures"] if f["name"] == "FP16 overflow")
    assert fp16["fail"]["loss"][0][2] is None
    assert fp16["fix"]["loss"][0][2] is not None
