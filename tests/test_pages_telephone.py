"""Builders of docs/telephone.md (gradflow_site/pages/telephone.py): layer-1 norms, widget."""

from __future__ import annotations

import html
import json
import re

import pytest

from gradflow_ref.telephone import network_gradients
from gradflow_site.pages import telephone as page


def test_layer1_is_factor_to_the_depth_for_orthogonal_weights():
    assert page.layer1(0.9, depth=10) == pytest.approx(0.9**10, rel=1e-12)


def test_measured_has_one_profile_per_factor_layer_1_first():
    grads = page.measured([0.8, 1.2], depth=5)
    assert len(grads) == 2 and all(len(g) == 5 for g in grads)
    assert grads[0][0] == pytest.approx(0.8**5, rel=1e-12)
    assert grads[1][-1] == pytest.approx(1.2, rel=1e-12)


def _payload(out: str) -> dict:
    m = re.search(r"data-gf-data=\"([^\"]*)\"", out)
    assert m, "widget HTML carries no data attribute"
    return json.loads(html.unescape(m.group(1)))


def test_widget_data_are_network_gradients_rounded():
    out = page.widget(factors=[0.9, 1.1], depth=4, start=0.9)
    data = _payload(out)
    assert data["factors"] == [0.9, 1.1] and data["depth"] == 4
    expected = network_gradients(1.1, depth=4).tolist()
    assert data["grads"][1] == pytest.approx(expected, rel=1e-3)


def test_widget_rejects_start_outside_factors():
    with pytest.raises(ValueError, match="`start` must be one of `factors`, got 0.5"):
        page.widget(factors=[0.9, 1.1], depth=4, start=0.5)
