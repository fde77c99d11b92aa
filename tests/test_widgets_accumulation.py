"""The accumulation widget (docs/accumulation.md) in chromium: its sliders and toggle show the
build-time draw they name, and the accumulation it does in the browser (GF.logic.accumulation)
agrees with gradflow_ref.accumulation.accumulate_grad_ on freshly computed gradients.

The page stores every projected gradient to 4 significant digits, so a mean of them is within
5e-4 of the largest component's size of gradflow_ref's own (projected) mean.
"""

from __future__ import annotations

import pytest
import torch

from gradflow_ref.accumulation import (
    accumulate_grad_,
    flat_grad,
    make_micro_batches,
    make_model,
)
from tests._browser import open_page

pytestmark = [pytest.mark.build, pytest.mark.browser]

STORED = 1e-3  # atol of a mean of projected gradients stored to 4 significant digits (|g| < 3)


@pytest.fixture(scope="module")
def page(browser, server):
    with open_page(browser, server, "accumulation/") as (page, record):
        yield page
        assert not record["errors"]


def widget_data(page) -> dict:
    return page.evaluate(
        "JSON.parse(document.querySelector('[data-gf-widget=\"accumulation\"]').dataset.gfData)"
    )


def shown(page) -> dict[str, str]:
    return page.locator('[data-gf-widget="accumulation"] .gf-status').evaluate(
        "e => ({...e.dataset, text: e.textContent})"
    )


def test_accumulation_widget_sliders_show_the_chosen_draw(page):
    fig = page.locator('[data-gf-widget="accumulation"]')
    data = widget_data(page)
    fig.get_by_role("slider", name="Micro-batches N").press("End")
    fig.get_by_role("slider", name="Tokens per micro-batch").press("Home")
    state = shown(page)
    n, b = data["counts"][-1], data["tokens"][0]
    assert (state["count"], state["tokens"]) == (str(n), str(b))
    assert f"{n} micro-batches of {b} tokens" in state["text"]
    assert fig.locator("svg.gf-acc__plot > g:last-child > g").count() == n + 3
    accumulated = torch.tensor([float(v) for v in state["accumulated"].split(",")])
    gradflow_ref_mean = torch.tensor(data["acc"][0][-1])  # accumulate_grad_, projected at build
    torch.testing.assert_close(accumulated, gradflow_ref_mean, rtol=0, atol=STORED)
    # equal to one big batch of the same tokens up to float64 rounding
    assert float(state["exact"]) < 1e-12
    assert float(state["noise"]) == data["noise"][0][-1]


def test_accumulation_widget_without_divisor_shows_the_sum(page):
    fig = page.locator('[data-gf-widget="accumulation"]')
    data = widget_data(page)
    fig.get_by_role("slider", name="Micro-batches N").press("Home")
    for _ in range(2):  # counts [1, 2, 4, ...]: two steps right is 4
        fig.get_by_role("slider", name="Micro-batches N").press("ArrowRight")
    fig.get_by_role("checkbox", name="Divide each loss by N").uncheck()
    state = shown(page)
    bi, ni = data["tokens"].index(int(state["tokens"])), data["counts"].index(4)
    assert state["count"] == "4" and state["divide"] == "false"
    assert "not divided" in state["text"] and "4 times the big-batch" in state["text"]
    summed = torch.tensor([float(v) for v in state["accumulated"].split(",")])
    torch.testing.assert_close(
        summed, 4 * torch.tensor(data["acc"][bi][ni]), rtol=0, atol=4 * STORED
    )
    fig.get_by_role("checkbox", name="Divide each loss by N").check()
    assert shown(page)["divide"] == "true"


@pytest.mark.parametrize("normalization", ["micro_mean", "none"])
def test_accumulation_logic_matches_accumulate_grad(page, normalization):
    model = make_model()
    batches = make_micro_batches([3] * 5, seed=7)
    own = []  # each micro-batch's own mean-loss gradient
    for mb in batches:
        accumulate_grad_(model, [mb])
        own.append(flat_grad(model).tolist())
    accumulate_grad_(model, batches, normalization)
    expected = flat_grad(model)
    got = page.evaluate(
        "([g, divide]) => GF.logic.accumulation.accumulate(g, divide)",
        [own, normalization == "micro_mean"],
    )
    torch.testing.assert_close(
        torch.tensor(got, dtype=torch.float64), expected, rtol=1e-12, atol=1e-15
    )
