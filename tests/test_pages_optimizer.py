"""Builders of docs/optimizer.md (gradflow_site/pages/optimizer.py): the decay threshold held
against torch's own BF16 arithmetic, the static figure and the widget's data."""

from __future__ import annotations

import html
import json
import re

import pytest
import torch

from gradflow_site.pages import optimizer as page


@pytest.mark.parametrize("weight", [0.02, 0.3, 1.0, 1.5, -3.0, 700.0])
def test_decay_threshold_is_where_torch_starts_to_decay_a_bf16_weight(weight):
    w = torch.tensor(weight, dtype=torch.bfloat16)
    t = page.decay_threshold(weight)
    assert (w * (1 - 0.99 * t)).item() == w.item()
    assert (w.float() * (1 - 1.01 * t)).bfloat16().item() != w.item()


def test_decay_threshold_lies_between_two_powers_of_two():
    for weight in (0.02, 0.1, 0.7, 1.0, 5.0):
        assert 2**-9 <= page.decay_threshold(weight) <= 2**-8


def test_decay_threshold_rejects_zero():
    with pytest.raises(ValueError, match="`weight` must be finite and non-zero, got 0.0"):
        page.decay_threshold(0.0)


def test_trajectory_svg_draws_the_exact_sum_and_four_methods():
    svg = page.trajectory_svg(1.0, 1e-4, 200)
    assert svg.count("<polyline") == 5
    label = html.unescape(re.search(r'aria-label="([^"]*)"', svg).group(1))
    assert "exact sum 1.02" in label and "round to nearest (w += u) 1," in label


def test_widget_keeps_the_data_contract():
    out = page.widget(1.0, 1e-4)
    data = json.loads(html.unescape(re.search(r'data-gf-data="([^"]*)"', out).group(1)))
    assert data["methods"] == ["nearest", "stochastic", "kahan", "master"]
    assert data["start"] in data["weights"] and data["update"] in data["updates"]
    assert 'class="gf-widget__static"><svg' in out


def test_widget_rejects_a_weight_off_the_slider():
    with pytest.raises(ValueError, match="`start` must be one of"):
        page.widget(0.3, 1e-4)
