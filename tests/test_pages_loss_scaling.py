"""Builders of docs/loss_scaling.md (gradflow_site/pages/loss_scaling.py): held against torch."""

from __future__ import annotations

import html
import json
import math
import re

import matplotlib.pyplot as plt
import pytest
import torch
from torch import nn

from gradflow_ref.loss_scaling import GradScaler
from gradflow_site.pages import loss_scaling as page


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
    fig, _ = plt.subplots()
    data = data_of(page.histogram_widget(gradients(), fig))
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
    fig, _ = plt.subplots()
    data = data_of(page.dynamic_widget(train, scales, fig, (3, 7), growth_interval=2))
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
