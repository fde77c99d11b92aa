"""The transformer widget (docs/transformer.md) in chromium: its controls select the profile
measured at build time, and that profile agrees with a fresh measurement on
gradflow_ref.transformer (the gradient norm at each block's input, over the last block's).

The page stores log10 of every ratio to 3 decimals, so a ratio is within 10**0.0005 - 1 =
0.12 % of a fresh measurement's.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gradflow_ref.transformer import Transformer, TransformerConfig, get_batch, shakespeare
from tests._browser import open_page

pytestmark = [pytest.mark.build, pytest.mark.browser]

ONE_RATIO = 1.2e-3  # rtol of one stored ratio (3-decimal log10)
# (norm, depth-scaled init, blocks, QK-norm): every setting, both ends of the depth slider
POINTS = [
    ("pre", True, 48, False),
    ("pre", False, 6, False),
    ("post", True, 12, False),
    ("post", False, 24, False),
    ("pre", False, 48, True),
    ("post", True, 6, True),
]


def reference(norm: str, depth_init: bool, n_layers: int, qk_norm: bool = False) -> torch.Tensor:
    """The page's measurement (snippets/transformer.py, grad_profile), over block L's norm."""
    torch.manual_seed(0)
    switches = dict(norm=norm, depth_init=depth_init, qk_norm=qk_norm)
    cfg = TransformerConfig(n_layers=n_layers, seq_len=16, **switches)
    model = Transformer(cfg)
    stream = []
    for block in model.blocks:
        block.register_forward_pre_hook(lambda module, args: stream.append(args[0]))
    x, y = get_batch(shakespeare(), 4, 16, torch.Generator().manual_seed(0))
    loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten())
    norms = torch.stack([g.norm() for g in torch.autograd.grad(loss, stream)]).double()
    return norms / norms[-1]


@pytest.fixture(scope="module")
def page(browser, server):
    with open_page(browser, server, "transformer/") as (page, record):
        yield page
        assert not record["errors"]


@pytest.mark.parametrize("point", POINTS, ids=lambda p: "-".join(map(str, p)))
def test_transformer_profile_matches_a_fresh_measurement(page, point):
    shown = page.evaluate("p => GF.logic.transformer.profile(...p)", list(point))
    torch.testing.assert_close(
        torch.tensor(shown, dtype=torch.float64), reference(*point), rtol=ONE_RATIO, atol=0
    )


def test_transformer_widget_controls_select_the_measured_profile(page):
    fig = page.locator('[data-gf-widget="transformer"]')
    fig.get_by_role("combobox", name="LayerNorm").select_option("post")
    blocks = fig.get_by_role("slider", name="Blocks")
    blocks.press("Home")  # depths [6, 12, 24, 48]: one step right is 12
    blocks.press("ArrowRight")
    fig.get_by_role("checkbox", name="Depth-scaled init").check()
    status = fig.locator(".gf-status")
    assert status.get_attribute("data-norm") == "post"
    assert status.get_attribute("data-depth") == "12"
    assert status.get_attribute("data-init") == "true"
    assert fig.locator(".gf-plot rect").count() == 12
    shown = float(status.get_attribute("data-block1"))
    expected = reference("post", True, 12)[0].item()
    torch.testing.assert_close(shown, expected, rtol=ONE_RATIO, atol=0)
    assert "post-LN, depth-scaled init on, QK-norm off, 12 blocks" in status.text_content()
    rest = reference("post", True, 12)[1:]
    torch.testing.assert_close(
        float(status.get_attribute("data-rest")),
        (rest.max() / rest.min()).item(),
        rtol=2 * ONE_RATIO,
        atol=0,
    )


def test_transformer_widget_depth_init_changes_pre_ln_only_as_measured(page):
    fig = page.locator('[data-gf-widget="transformer"]')
    fig.get_by_role("combobox", name="LayerNorm").select_option("pre")
    fig.get_by_role("slider", name="Blocks").press("End")
    toggle = fig.get_by_role("checkbox", name="Depth-scaled init")
    status = fig.locator(".gf-status")
    ratios = {}
    for on in (False, True):
        toggle.set_checked(on)
        assert status.get_attribute("data-init") == str(on).lower()
        ratios[on] = float(status.get_attribute("data-block1"))
    for on, ratio in ratios.items():
        expected = reference("pre", on, 48)[0].item()
        torch.testing.assert_close(ratio, expected, rtol=ONE_RATIO, atol=0)


def test_transformer_widget_qk_norm_toggle_selects_the_qk_norm_profile(page):
    fig = page.locator('[data-gf-widget="transformer"]')
    fig.get_by_role("combobox", name="LayerNorm").select_option("pre")
    fig.get_by_role("slider", name="Blocks").press("End")
    fig.get_by_role("checkbox", name="Depth-scaled init").set_checked(False)
    toggle = fig.get_by_role("checkbox", name="QK-norm")
    status = fig.locator(".gf-status")
    for on in (True, False):
        toggle.set_checked(on)
        assert status.get_attribute("data-qk") == str(on).lower()
        assert f"QK-norm {'on' if on else 'off'}, 48 blocks" in status.text_content()
        expected = reference("pre", False, 48, qk_norm=on)[0].item()
        shown = float(status.get_attribute("data-block1"))
        torch.testing.assert_close(shown, expected, rtol=ONE_RATIO, atol=0)
