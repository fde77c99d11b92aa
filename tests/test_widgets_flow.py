"""The flow widget (docs/flow.md) in chromium: its controls select the right build-time
profile, and the per-layer arithmetic it does in the browser (GF.logic.flow) agrees with
gradflow_ref.flow on freshly built networks.

The page stores log10 of every ratio to 3 decimals, so one ratio is within 10**0.0005 - 1 =
0.12 % of gradflow_ref's and a ratio of two ratios within 0.24 %.
"""

from __future__ import annotations

import math

import pytest
import torch

from gradflow_ref.flow import MLPConfig, build_mlp, gradient_norms, layer_factors
from tests._browser import open_page

pytestmark = [pytest.mark.build, pytest.mark.browser]

INIT = {"sigmoid": "xavier", "tanh": "xavier", "relu": "he", "identity": "xavier"}
ONE_RATIO = 1.2e-3  # rtol of one stored ratio (3-decimal log10)
TWO_RATIOS = 2.4e-3  # rtol of a ratio of two stored ratios
# (activation, weight multiplier, depth): both ends of both sliders, every activation
POINTS = [("relu", 1.0, 20), ("sigmoid", 0.25, 40), ("tanh", 16.0, 2), ("identity", 2**1.5, 15)]


def reference(activation: str, scale: float, depth: int):
    """Build the network the page measured; return it, its input and the norm ratios."""
    # the page's batch, torch.manual_seed(0); torch.randn(32, 64), in float64
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(0)).double()
    cfg = MLPConfig(depth=depth, activation=activation, init=INIT[activation], scale=scale)
    net = build_mlp(cfg, dtype=torch.float64)
    return net, x, gradient_norms(net, x) / math.sqrt(x.numel())


@pytest.fixture(scope="module")
def page(browser, server):
    with open_page(browser, server, "flow/") as (page, record):
        yield page
        assert not record["errors"]


def test_flow_widget_controls_select_the_measured_profile(page):
    fig = page.locator('[data-gf-widget="flow"]')
    fig.get_by_role("combobox", name="Activation").select_option("tanh")
    layers = fig.get_by_role("slider", name="Layers")
    layers.press("Home")  # depths [2, 4, 6, 8, 10, ...]: four steps right is 10
    for _ in range(4):
        layers.press("ArrowRight")
    fig.get_by_role("slider", name="Weights ×").press("End")
    status = fig.locator(".gf-status")
    assert status.get_attribute("data-activation") == "tanh"
    assert status.get_attribute("data-depth") == "10"
    assert float(status.get_attribute("data-scale")) == 16.0
    assert fig.locator(".gf-plot rect").count() == 10
    _, _, expected = reference("tanh", 16.0, 10)
    shown = float(status.get_attribute("data-layer1"))
    torch.testing.assert_close(shown, expected[0].item(), rtol=ONE_RATIO, atol=0)
    assert "tanh (xavier init), 10 layers" in status.text_content()


@pytest.mark.parametrize("point", POINTS, ids=lambda p: "-".join(map(str, p)))
def test_flow_profile_matches_gradient_norms(page, point):
    _, _, expected = reference(*point)
    profile = page.evaluate("p => GF.logic.flow.profile(...p)", list(point))
    torch.testing.assert_close(
        torch.tensor(profile, dtype=torch.float64), expected, rtol=ONE_RATIO, atol=0
    )


@pytest.mark.parametrize("point", POINTS, ids=lambda p: "-".join(map(str, p)))
def test_flow_factors_match_layer_factors(page, point):
    net, x, _ = reference(*point)
    factors = page.evaluate("p => GF.logic.flow.factors(GF.logic.flow.profile(...p))", list(point))
    torch.testing.assert_close(
        torch.tensor(factors, dtype=torch.float64), layer_factors(net, x), rtol=TWO_RATIOS, atol=0
    )


@pytest.mark.parametrize("point", POINTS, ids=lambda p: "-".join(map(str, p)))
def test_flow_mean_factor_is_the_geometric_mean_of_layer_factors(page, point):
    net, x, _ = reference(*point)
    mean = page.evaluate("p => GF.logic.flow.meanFactor(GF.logic.flow.profile(...p))", list(point))
    expected = layer_factors(net, x).log().mean().exp().item()
    torch.testing.assert_close(mean, expected, rtol=ONE_RATIO, atol=0)
