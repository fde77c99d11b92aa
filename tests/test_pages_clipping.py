"""Builders of docs/clipping.md (gradflow_site/pages/clipping.py): cases held against torch."""

from __future__ import annotations

import html
import json
import re

import matplotlib.pyplot as plt
import pytest
import torch

from gradflow_site.pages import clipping as page


def test_square_corner_value_clipping_leaves_a_point_inside_the_square():
    by_value, by_norm = page.square_corner((0.9, 0.9), threshold=1.0)
    assert by_value == pytest.approx(0.9 * 2**0.5, rel=1e-6)
    assert by_norm == pytest.approx(1.0, rel=1e-5)


def test_negative_max_norm_torch_flips_the_gradient_and_gradflow_ref_refuses():
    grad, message = page.negative_max_norm((3.0, 4.0), -1.0)
    assert grad == pytest.approx([-0.6, -0.8], rel=1e-5)
    assert "`max_norm` must be positive and finite, got -1.0" in message


def test_negative_max_norm_rejects_a_threshold_gradflow_ref_accepts():
    with pytest.raises(ValueError, match="gradflow_ref accepted `max_norm` 1.0"):
        page.negative_max_norm((3.0, 4.0), 1.0)


def test_norm_of_norms_counts_tensors_not_elements():
    nonzero, theirs, ours = page.norm_of_norms(((1.0, 0.0, 2.0), (0.0, 5.0), (0.0,)))
    assert nonzero == 3 and theirs == ours == 2.0


def test_reference_source_is_gradflow_refs_code_without_docstrings():
    src = page.reference_source()
    assert src.startswith("```python\n") and src.endswith("\n```")
    assert "def clip_grad_norm_(" in src and "torch.clamp(max_norm / (total_norm + 1e-6)" in src
    assert "Args:" not in src


def test_widget_keeps_the_data_contract():
    fig, _ = plt.subplots()
    out = page.widget(torch.tensor([2.4, 0.6]), fig)
    data = json.loads(html.unescape(re.search(r'data-gf-data="([^"]*)"', out).group(1)))
    assert data == {
        "start": [2.4, 0.6],
        "threshold": 1.0,
        "extent": 3.0,
        "thresholds": [0.1, 3.0, 0.05],
    }
