"""The optimizer widget (docs/optimizer.md) in chromium: the BF16 arithmetic it runs in the
browser (GF.logic.optimizer) against gradflow_ref.optimizer and torch, and its two sliders.

Round to nearest, Kahan and the FP32 master are deterministic: the browser's trajectories must
equal gradflow_ref.optimizer.trajectory value for value. Stochastic rounding draws its random
bits from a different generator in the browser, so it is held to the same bit trick with the
same bits, and to its expectation.
"""

from __future__ import annotations

import pytest
import torch

import gradflow_ref.optimizer as ref
from tests._browser import open_page

pytestmark = [pytest.mark.build, pytest.mark.browser]

# (weight, update): the widget's default, updates below, near and above half a spacing, a
# negative update, weights from 0.01 to 10
CASES = [
    (1.0, 1e-4),
    (1.0, 3e-3),
    (1.0, 5e-3),
    (0.02, 3e-5),
    (0.02, -1e-4),
    (10.0, 1e-2),
    (0.5, 1e-6),
    (5.0, 3e-3),
]


@pytest.fixture(scope="module")
def page(browser, server):
    with open_page(browser, server, "optimizer/") as (page, record):
        yield page
        assert not record["errors"]


def browser_trajectory(page, w, u, steps, method):
    return page.evaluate(
        "([w, u, n, m]) => GF.logic.optimizer.trajectory(w, u, n, m)", [w, u, steps, method]
    )


@pytest.mark.parametrize("method", ["nearest", "kahan", "master"])
@pytest.mark.parametrize(("w", "u"), CASES, ids=[f"{w}+{u}" for w, u in CASES])
def test_trajectory_matches_gradflow_ref(page, w, u, method):
    ours = torch.tensor(browser_trajectory(page, w, u, 300, method))
    expected = ref.trajectory(w, u, 300, method)[:, 0].double()
    torch.testing.assert_close(ours.double(), expected, rtol=0, atol=0)


def test_bf16_rounds_like_torch(page):
    xs = torch.randn(2000, dtype=torch.float64) * torch.logspace(-30, 30, 2000, dtype=torch.float64)
    xs = xs.float()
    ours = page.evaluate("xs => xs.map(GF.logic.optimizer.bf16)", xs.tolist())
    torch.testing.assert_close(
        torch.tensor(ours, dtype=torch.float64), xs.bfloat16().double(), rtol=0, atol=0
    )


def test_stochastic_rounding_uses_gradflow_refs_bit_trick(page):
    gen = torch.Generator().manual_seed(0)
    xs = (torch.randn(500, generator=gen) * 10).float()
    noise = torch.randint(0, 1 << 16, (500,), generator=gen, dtype=torch.int32)
    ours = page.evaluate(
        "([xs, ns]) => xs.map((x, i) => GF.logic.optimizer.bf16Stochastic(x, ns[i]))",
        [xs.tolist(), noise.tolist()],
    )
    expected = ((xs.view(torch.int32) + noise) & -65536).view(torch.float32)
    torch.testing.assert_close(torch.tensor(ours), expected, rtol=0, atol=0)


def test_stochastic_trajectory_averages_to_the_exact_sum(page):
    finals = page.evaluate(
        "() => Array.from({length: 200}, (_, s) => "
        "GF.logic.optimizer.trajectory(1, 1e-4, 1000, 'stochastic', s + 1)[1000])"
    )
    # 1000 roundings of spacing 2**-7, p ~ 0.0128: std 0.028 per copy, 0.002 for the mean
    assert abs(sum(finals) / len(finals) - 1.1) < 0.01
    assert len(set(finals)) > 3


def test_sliders_change_weight_and_update(page):
    fig = page.locator('[data-gf-widget="optimizer"]')
    status = fig.locator(".gf-status")
    assert status.get_attribute("data-nearest") == "1"
    fig.get_by_role("slider", name="Update per step").press("End")  # 1e-2
    assert float(status.get_attribute("data-update")) == 1e-2
    # from 1.0, 1e-2 per step climbs until half the spacing exceeds it (at 4.0), then stalls
    stalled = ref.trajectory(1.0, 1e-2, 1000, "nearest")[-1, 0].item()
    assert float(status.get_attribute("data-nearest")) == stalled == 4.0
    fig.get_by_role("slider", name="Weight").press("Home")  # 0.01
    assert float(status.get_attribute("data-weight")) == 0.01
    expected = ref.trajectory(0.01, 1e-2, 1000, "master")[-1, 0].item()
    assert float(status.get_attribute("data-master")) == expected
    assert fig.locator(".gf-plot path").count() == 5
