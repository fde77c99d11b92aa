"""Builders of docs/loss_scaling.md (gradflow_site/pages/loss_scaling.py): held against torch."""

from __future__ import annotations

import html
import json
import math
import re
import runpy

import matplotlib.pyplot as plt
import pytest
import torch
from torch import nn

from gradflow_ref.loss_scaling import GradScaler
from gradflow_site.pages import loss_scaling as page
from tests._site import ROOT


def data_of(out: str) -> dict:
    return json.loads(html.unescape(re.search(r'data-gf-data="([^"]*)"', out).group(1)))


def gradients() -> torch.Tensor:
    g = torch.logspace(-30, 10, 300, base=2.0)
    return torch.cat([g, -g * 0.7])


def test_fp16_counts_match_torchs_cast():
    g = torch.tensor([1e-8, -1e-8, 1e-6, 1.0, 7e4, -7e4])
    assert page.fp16_counts(g, 0) == {"zero": 2, "subnormal": 1, "overflow": 2}
    assert page.fp16_counts(g, 10) == {"zero": 0, "subnormal": 2, "overflow": 2}


def test_histogram_bins_hold_their_gradients():
    g = gradients()
    h = page.histogram(g)
    assert sum(h["counts"]) == h["total"] == g.numel()
    for value in g.abs().double().tolist():
        i = h["first"] + next(
            j for j in range(len(h["counts"])) if value <= 2 ** ((h["first"] + j) * h["width"])
        )
        assert 2 ** ((i - 1) / 4) < value <= 2 ** (i / 4)


def test_histogram_fp16_counts_are_torchs_at_every_scale():
    g = gradients()
    h = page.histogram(g)
    for i, k in enumerate(h["exponents"]):
        counts = page.fp16_counts(g, k)
        assert {name: h["fp16"][name][i] for name in counts} == counts
    assert h["limits"] == {"zero": -25.0, "normal": -14.0, "inf": math.log2(65520.0)}


@pytest.mark.parametrize(
    "bad", [torch.tensor([]), torch.tensor([1.0, 0.0]), torch.tensor([1.0, math.nan])]
)
def test_histogram_rejects_zero_empty_or_nan_gradients(bad):
    with pytest.raises(ValueError, match="`nonzero` must hold finite nonzero gradients"):
        page.histogram(bad)


def test_histogram_widget_keeps_the_data_contract():
    data = data_of(page.histogram_widget(gradients()))
    assert set(data) == {
        "width",
        "first",
        "counts",
        "exponents",
        "total",
        "fp16",
        "sliver",
        "limits",
    }
    assert data["exponents"] == list(range(25)) and set(data["sliver"]) == {"normal", "inf"}


def train(scaler, steps):
    """A tiny FP32 run whose scaled gradients overflow at steps 3 and 7 (loss times 1e36)."""
    torch.manual_seed(0)
    net = nn.Linear(4, 1)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.1)
    x = torch.randn(8, 4)
    scales, losses = [], []
    for step in range(steps):
        loss = net(x).pow(2).mean() * (1e36 if step in (3, 7) else 1.0)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
        scales.append(scaler.get_scale())
        losses.append(loss.item())
    return scales, losses


def test_replay_records_what_gradflow_refs_scaler_did():
    scales, _ = train(GradScaler(init_scale=2.0**16, growth_interval=2), steps=10)
    recorder, losses = page.replay(train, scales, growth_interval=2)
    assert [h["after"] for h in recorder.history] == scales
    assert [i for i, h in enumerate(recorder.history) if h["inf"]] == [3, 7]
    at_inf = recorder.history[3]
    assert at_inf["tracker"] == 0 and at_inf["after"] == at_inf["scale"] * 0.5
    assert len(losses) == 10


def test_replay_refuses_a_run_it_cannot_reproduce():
    scales, _ = train(GradScaler(init_scale=2.0**16, growth_interval=2), steps=10)
    with pytest.raises(ValueError, match="differs from `scales` at step 0"):
        page.replay(train, [s * 2 for s in scales], growth_interval=2)


def test_dynamic_widget_keeps_the_data_contract():
    scales, _ = train(GradScaler(init_scale=2.0**16, growth_interval=2), steps=10)
    data = data_of(page.dynamic_widget(train, scales, (3, 7), growth_interval=2))
    assert set(data) == {
        "init_scale",
        "growth_factor",
        "backoff_factor",
        "growth_interval",
        "corrupted",
        "scale",
        "inf",
        "tracker",
        "after",
        "loss",
    }
    assert data["after"] == scales and data["inf"] == [0, 0, 0, 1, 0, 0, 0, 1, 0, 0]
    assert (data["growth_factor"], data["backoff_factor"], data["corrupted"]) == (2.0, 0.5, [3, 7])


def test_histogram_figure_draws_both_scales_and_the_three_zones():
    fig = page.histogram_figure(gradients(), scaled=16)
    ax = fig.axes[0]
    labels = ax.get_legend_handles_labels()[1]
    assert labels[:2] == ["scale 2^0", "scale 2^16"]
    assert {"rounds to zero in FP16", "FP16 subnormal", "overflows to inf"} <= set(labels)
    # the axis holds the unscaled minimum and the scaled maximum
    lo, hi = ax.get_xlim()
    g = gradients().abs().log2()
    assert lo < g.min().item() and hi > g.max().item() + 16
    plt.close(fig)


def test_history_figure_marks_each_skipped_step():
    scales = [4.0, 2.0, 4.0, 4.0, 2.0]
    fig = page.history_figure(scales, skipped=[1, 4], corrupted=[4])
    crosses = [line for line in fig.axes[0].lines if line.get_marker() == "x"]
    assert list(crosses[0].get_xdata()) == [1, 4]
    assert list(crosses[0].get_ydata()) == [1.0, 1.0]
    plt.close(fig)


def runs_of(n_seeds=3, early=5, late=4):
    """Synthetic (losses, zeros) per seed: what snippets/loss_scaling.py's `train` returns."""

    def run(offset, n):
        return [1.0 / (i + 1 + offset) for i in range(n)], [0.1 * offset] * n

    return [run(s, early) for s in range(n_seeds)], {
        name: [run(s, late) for s in range(n_seeds)] for name in ("FP32", "FP16")
    }


def test_late_training_figure_draws_median_and_band_per_precision():
    early, runs = runs_of()
    fig = page.late_training_figure(early, runs, tokens=256)
    top, bottom = fig.axes
    medians = {line.get_label(): line for line in top.lines if not line.get_label().startswith("_")}
    assert list(medians) == ["FP32, before the runs part", "FP32", "FP16"]
    # the late runs continue the step count of the early ones
    assert list(medians["FP32"].get_xdata()) == [6, 7, 8, 9]
    # median over seeds: seeds offset 0, 1, 2 -> the middle one
    assert medians["FP16"].get_ydata()[0] == pytest.approx(1 / 2)
    assert top.get_yscale() == "log"
    # the threshold line sits at N * 2^-25
    assert any(line.get_ydata()[0] == 256 * 2.0**-25 for line in top.lines)
    # the zero share is drawn in percent: the median seed's 0.1 is 10 %
    zero_lines = [line for line in bottom.lines if line.get_label() == "FP16"]
    assert zero_lines[0].get_ydata()[0] == pytest.approx(10.0)
    plt.close(fig)


def test_late_training_figure_rejects_runs_without_one_log_per_seed():
    early, runs = runs_of()
    runs["FP16"] = runs["FP16"][:2]
    with pytest.raises(
        ValueError, match="one \\(losses, zeros\\) per seed of `early` \\(3 seeds\\)"
    ):
        page.late_training_figure(early, runs, tokens=256)


# What the page's sentences say about the numbers snippets/loss_scaling.py computes.


@pytest.fixture(scope="module")
def shown():
    """The names the page's code leaves behind, run as the page runs it (about 10 s)."""
    return runpy.run_path(str(ROOT / "snippets" / "loss_scaling.py"))


def test_late_training_fp16_stalls_just_below_the_threshold_line(shown):
    line = shown["tokens"] * 2.0**-25
    fp16 = shown["final"]["FP16"]
    assert all(0.5 * line < loss < line for loss in fp16)
    # it followed FP32 for a while after the runs part: lower 20 steps in than at the start
    for (fp16_losses, _), (early_losses, _) in zip(shown["runs"]["FP16"], shown["early"]):
        assert sum(fp16_losses[15:25]) / 10 < early_losses[-1]


def test_late_training_scaled_and_bf16_runs_end_where_fp32_does(shown):
    final = shown["final"]
    for name in ("FP16 + GradScaler", "BF16"):
        for ours, fp32 in zip(final[name], final["FP32"]):
            assert ours == pytest.approx(fp32, rel=0.1)


def test_late_training_zeros_outside_fp16_are_absent_tokens_rows(shown):
    model, dim = shown["model"], shown["dim"]
    one_row = dim / sum(p.numel() for p in model.parameters())
    for name in ("FP32", "BF16"):
        for _, zeros in shown["runs"][name]:
            # each share is a whole number of embedding rows: tokens the batch did not draw
            assert all(abs(z / one_row - round(z / one_row)) < 1e-4 for z in zeros)
    scaled = max(max(zeros) for _, zeros in shown["runs"]["FP16 + GradScaler"])
    assert scaled <= max(shown["zero_share"]["FP32"], shown["zero_share"]["BF16"])
    assert shown["zero_share"]["FP16"] == 1.0


def test_logit_gradients_largest_entry_is_the_targets_and_above_2_to_the_minus_25(shown):
    g = shown["logits"].grad
    targets = shown["successor"][shown["x"]]
    target = g.gather(1, targets[:, None]).squeeze(1)
    assert bool((target < 0).all()) and bool((target.abs() >= g.abs().max(1).values).all())
    # at the step where the runs part, every token still keeps its target's gradient in FP16
    assert bool((target.abs() > 2.0**-25).all())


def test_logit_gradients_left_at_zero_by_2_to_the_16_have_negligible_probabilities(shown):
    g, tokens = shown["g"], shown["tokens"]
    zero = (g * 2.0**16).half() == 0
    assert zero.any()
    assert bool((g[zero].abs() * tokens <= tokens * 2.0**-25 / 2**16).all())


def test_static_2_to_the_10_skips_only_the_corrupted_batch(shown):
    first = shown["CORRUPTED"][0]
    for steps, skipped in ((first, 0), (first + 1, 1)):
        scaler = shown["ref"].StaticScaler(2.0**10)
        shown["train_classifier"](scaler, steps)
        assert scaler.skipped_steps == skipped


def test_dynamic_history_backs_off_at_the_corrupted_batches_and_climbs_back(shown):
    history, skips, corrupted = shown["history"], shown["skips"], shown["CORRUPTED"]
    assert set(corrupted) <= set(skips)
    # after the first two skips, the scale grows again before every skip on a clean batch
    assert all(
        max(history[a:b]) > history[a] for a, b in zip(skips[1:], skips[2:]) if b not in corrupted
    )
    static_24 = shown["results"]["static 2^24"]
    assert static_24["skipped"] == 60
