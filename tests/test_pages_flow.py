"""Builders of docs/flow.md (gradflow_site/pages/flow.py): crossings, profiles and the widget."""

from __future__ import annotations

import html
import json
import math
import re

import pytest
import torch

from gradflow_ref.flow import MLPConfig, build_mlp, gradient_norms
from gradflow_site.pages import flow as page

SMALL = {
    "pairs": [("relu", "he"), ("sigmoid", "xavier")],
    "depths": [2, 3],
    "multipliers": [1.0, 2.0],
}


@pytest.fixture(scope="module")
def small():
    return page.profiles(**SMALL)


def test_crossing_is_the_first_scale_whose_ratio_reaches_one():
    assert page.crossing([0.5, 1.0, 2.0, 4.0], [0.1, 0.9, 1.0, 3.0]) == 2.0


def test_crossing_rejects_ratios_that_never_reach_one():
    with pytest.raises(ValueError, match="no ratio reaches 1"):
        page.crossing([0.5, 1.0], [0.1, 0.2])


def test_batch_is_the_pages_seeded_batch_in_float64():
    torch.manual_seed(0)
    torch.testing.assert_close(page.batch(), torch.randn(32, 64).double(), rtol=0, atol=0)


def test_multipliers_hold_the_static_tables_columns():
    assert set(page.SHOWN) <= set(page.MULTIPLIERS)


def test_profiles_match_gradient_norms_of_the_shallow_network(small):
    x = page.batch()
    net = build_mlp(
        MLPConfig(depth=2, activation="sigmoid", init="xavier", scale=2.0), dtype=torch.float64
    )
    expected = gradient_norms(net, x) / math.sqrt(x.numel())
    torch.testing.assert_close(
        torch.tensor(small.at("sigmoid", 2.0, 2), dtype=torch.float64), expected, rtol=1e-12, atol=0
    )
    assert small.layer1("sigmoid", 2.0, 2) == small.at("sigmoid", 2.0, 2)[0]


def test_profiles_measure_the_batch_they_are_given():
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(3))
    got = page.profiles([("tanh", "xavier")], [2], [1.0], x=x.requires_grad_())
    net = build_mlp(MLPConfig(depth=2, activation="tanh", init="xavier"), dtype=torch.float64)
    expected = gradient_norms(net, x.double()) / math.sqrt(x.numel())
    torch.testing.assert_close(
        torch.tensor(got.at("tanh", 1.0, 2), dtype=torch.float64), expected, rtol=1e-12, atol=0
    )


def test_reference_source_shows_gradient_norms_without_its_docstring():
    out = page.reference_source()
    assert out.startswith("```python\ndef gradient_norms(") and out.endswith("```")
    assert "register_forward_pre_hook" in out and "Args:" not in out


def test_widget_keeps_the_data_contract(small):
    out = page.widget(small, shown=[1.0, 2.0], depth=3)
    data = json.loads(html.unescape(re.search(r'data-gf-data="([^"]*)"', out).group(1)))
    assert data["activations"] == ["relu", "sigmoid"] and data["inits"] == ["he", "xavier"]
    assert data["depths"] == [2, 3] and data["scales"] == [1.0, 2.0]
    stored = data["log10"]["relu"][1][1]  # multiplier 2.0, depth 3
    assert len(stored) == 3
    assert stored == [round(math.log10(v), 3) for v in small.at("relu", 2.0, 3)]


def test_widget_static_table_shows_layer_1_by_multiplier(small):
    out = page.widget(small, shown=[1.0, 2.0], depth=3)
    assert "<table>" in out and "×2" in out
    assert f"{small.layer1('sigmoid', 2.0, 3):.1e}" in out
