"""Builders of docs/transformer.md (gradflow_site/pages/transformer.py): the widget's data and
its static figure, from profiles shaped as the chapter's snippet measures them."""

from __future__ import annotations

import html
import json
import math
import re

import pytest
import torch

from gradflow_site.pages import transformer as page

DEPTHS = [2, 3]


def _profiles(depths=DEPTHS):
    """Profiles whose block k (1-based) of L has norm 2 ** (L - k): block 1 largest."""
    return {
        (norm, depth_init, n): torch.tensor([2.0 ** (n - k) for k in range(1, n + 1)])
        for norm in ("pre", "post")
        for depth_init in (True, False)
        for n in depths
    }


def test_widget_data_stores_log10_relative_to_the_last_block():
    qk = {key: p.flip(0) for key, p in _profiles().items()}  # block 1 smallest
    data = page.widget_data(_profiles(), qk, DEPTHS)
    assert data["depths"] == DEPTHS
    assert set(data["log10"]) == {"off", "on"}  # QK-norm
    assert set(data["log10"]["on"]) == {"pre", "post"}
    assert set(data["log10"]["on"]["pre"]) == {"on", "off"}  # depth-scaled init
    without, with_qk = data["log10"]["off"]["post"]["off"][1], data["log10"]["on"]["post"]["off"][1]
    assert without == [round(math.log10(4), 3), round(math.log10(2), 3), 0]
    assert with_qk == [round(math.log10(0.25), 3), round(math.log10(0.5), 3), 0]


def test_widget_data_rejects_a_missing_qk_norm_setting():
    qk = _profiles()
    del qk["pre", True, 2]
    with pytest.raises(ValueError, match=r"`qk_profiles` has no entry \('pre', True, 2\)"):
        page.widget_data(_profiles(), qk, DEPTHS)


def test_widget_data_rejects_a_missing_setting():
    profiles = _profiles()
    del profiles["post", False, 3]
    with pytest.raises(ValueError, match=r"no entry \('post', False, 3\)"):
        page.widget_data(profiles, _profiles(), DEPTHS)


def test_widget_data_rejects_a_profile_of_the_wrong_length():
    profiles = _profiles()
    profiles["pre", True, 3] = torch.ones(2)
    with pytest.raises(ValueError, match=r"must hold 3 positive finite norms, got 2 values"):
        page.widget_data(profiles, _profiles(), DEPTHS)


def test_widget_data_rejects_a_zero_norm():
    profiles = _profiles()
    profiles["pre", True, 2] = torch.tensor([1.0, 0.0])
    with pytest.raises(ValueError, match="positive finite norms"):
        page.widget_data(profiles, _profiles(), DEPTHS)


def test_profile_figure_draws_four_settings_and_names_block_1():
    svg = page.profile_figure(_profiles(), 3)
    assert svg.count("<polyline") == 4
    assert svg.count('stroke-dasharray="5 4"') == 4  # depth init off: two lines, two legend keys
    label = html.unescape(re.search(r'aria-label="([^"]*)"', svg).group(1))
    assert "pre-LN, depth init on: block 1 gets 4 times block 3's" in label


def test_widget_keeps_the_data_contract():
    out = page.widget(_profiles(), _profiles(), DEPTHS, shown_depth=3)
    assert 'data-gf-widget="transformer"' in out
    data = json.loads(html.unescape(re.search(r'data-gf-data="([^"]*)"', out).group(1)))
    assert data == page.widget_data(_profiles(), _profiles(), DEPTHS)
    assert "<svg" in out


def _log(values):
    return {"max_logit": torch.tensor(values, dtype=torch.float32)}


def test_training_figure_draws_the_median_and_a_band_per_setting():
    runs = {
        "a": [_log([1.0, 10.0]), _log([1.0, 1000.0]), _log([1.0, 100.0])],
        "b": [_log([2.0, 2.0])],
    }
    figure = page.training_figure(runs, "max_logit")
    wide, narrow = re.findall(r'<div class="gf-figure__(?:wide|narrow)">(.*?)</div>', figure)
    for svg in (wide, narrow):  # the phone rendering draws the same lines and bands
        assert svg.count("<polyline") == 2 and svg.count("<polygon") == 2
    assert 'viewBox="0 0 640 ' in wide and 'viewBox="0 0 340 ' in narrow
    svg = wide
    label = html.unescape(re.search(r'aria-label="([^"]*)"', svg).group(1))
    assert "a: 100 at the last step" in label and "b: 2 at the last step" in label


def test_training_figure_rejects_a_log_without_the_key():
    with pytest.raises(ValueError, match="a run of 'a' has no 'entropy' in its log"):
        page.training_figure({"a": [_log([1.0])]}, "entropy")


def test_training_figure_rejects_values_a_log_scale_cannot_draw():
    with pytest.raises(ValueError, match="must be positive for a log scale"):
        page.training_figure({"a": [_log([1.0, 0.0])]}, "max_logit")


def test_training_figure_rejects_an_unknown_key():
    with pytest.raises(ValueError, match="`key` must be one of .*, got 'norm'"):
        page.training_figure({"a": [_log([1.0])]}, "norm")
