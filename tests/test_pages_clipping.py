"""Builders of docs/clipping.md (gradflow_site/pages/clipping.py): cases held against torch."""

from __future__ import annotations

import html
import json
import re

import matplotlib.pyplot as plt
import pytest
import torch

from gradflow_site.pages import clipping as page


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


def test_circle_figure_draws_circle_square_and_three_arrows():
    g = torch.tensor([2.4, 0.6])
    fig = page.circle_figure(g, g / g.norm(), g.clamp(-1, 1))
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:2] == ["max_norm = 1 (circle)", "clip_value = 1 (square)"]
    assert "norm-clipped, turned 0.0°" in labels and "value-clipped, turned 16.9°" in labels
    assert len([c for c in ax.get_children() if type(c).__name__ == "Annotation"]) == 3
    plt.close(fig)


def test_circle_figure_rejects_a_gradient_that_is_not_2d():
    g = torch.ones(3)
    with pytest.raises(ValueError, match="must hold 2 elements each"):
        page.circle_figure(g, g, g)


def test_widget_keeps_the_data_contract():
    g = torch.tensor([2.4, 0.6])
    out = page.widget(g, g / g.norm(), g.clamp(-1, 1))
    data = json.loads(html.unescape(re.search(r'data-gf-data="([^"]*)"', out).group(1)))
    assert data == {
        "start": [2.4, 0.6],
        "threshold": 1.0,
        "extent": 3.0,
        "thresholds": [0.1, 3.0, 0.05],
    }


def _log(steps: int, spike_at: int, lr_eff_drop: float) -> dict[str, torch.Tensor]:
    log = {key: torch.ones(steps) for key, _, _ in page.SPIKE_PANELS}
    log["lr_eff"][spike_at:] = lr_eff_drop
    return log


def test_spike_figure_draws_median_of_seeds_relative_to_the_step_before_the_outlier():
    runs = {"no clipping": [_log(10, 4, 0.1), _log(10, 4, 0.3), _log(10, 4, 0.2)]}
    fig = page.spike_figure(runs, spike_at=4)
    assert len(fig.axes) == len(page.SPIKE_PANELS)
    lr_panel = fig.axes[3]
    median = lr_panel.get_lines()[0].get_ydata()
    torch.testing.assert_close(torch.as_tensor(median[3:5]), torch.tensor([1.0, 0.2]).double())
    assert lr_panel.get_yscale() == "log"
    plt.close(fig)


def test_spike_figure_rejects_a_log_without_a_panel_key():
    log = _log(10, 4, 0.1)
    del log["lr_eff"]
    with pytest.raises(ValueError, match="has no \\['lr_eff'\\]"):
        page.spike_figure({"no clipping": [log]}, spike_at=4)


def test_spike_figure_rejects_spike_at_outside_the_runs():
    with pytest.raises(ValueError, match="`spike_at` must be a step inside the runs"):
        page.spike_figure({"no clipping": [_log(10, 4, 0.1)]}, spike_at=10)
