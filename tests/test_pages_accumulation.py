"""Builders of docs/accumulation.md (gradflow_site/pages/accumulation.py): the widget's payload."""

from __future__ import annotations

import ast

import pytest
import torch

from gradflow_ref.accumulation import (
    big_batch_grad_,
    divisor_bug_update_ratio,
    flat_grad,
    make_micro_batches,
    make_model,
)
from gradflow_site.pages import accumulation as page

STORED = 1e-3  # atol of values the payload stores to 4 significant digits (|value| < 3)


@pytest.fixture(scope="module")
def ex():
    return page.explorer()


def test_explorer_payload_has_one_cell_per_slider_position(ex):
    data = ex.data
    assert data["counts"] == list(page.COUNTS) and data["tokens"] == list(page.TOKENS)
    assert [len(g) for g in data["grads"]] == [page.COUNTS[-1]] * len(page.TOKENS)
    for key in ("acc", "big", "exact", "noise"):
        assert [len(row) for row in data[key]] == [len(page.COUNTS)] * len(page.TOKENS)
    assert data["params"] == ex.params == sum(p.numel() for p in make_model().parameters())


def test_plane_puts_the_full_gradient_on_one_zero():
    model = make_model()
    big_batch_grad_(model, make_micro_batches([page.POOL_TOKENS]))
    full = flat_grad(model)
    spread = full + torch.randn(8, full.numel(), dtype=full.dtype)
    proj = page.plane(full, spread)
    torch.testing.assert_close(proj @ full, torch.tensor([1.0, 0.0], dtype=full.dtype))
    torch.testing.assert_close(proj[0] @ proj[1], torch.tensor(0.0, dtype=full.dtype))


def test_explorer_accumulated_arrow_is_the_mean_of_the_micro_batch_arrows(ex):
    for i, b in enumerate(page.TOKENS):
        arrows = ex.micro_grads[b] @ ex.plane.T
        for j, n in enumerate(page.COUNTS):
            mean = arrows[:n].mean(0)
            torch.testing.assert_close(
                torch.tensor(ex.data["acc"][i][j], dtype=mean.dtype), mean, atol=STORED, rtol=0
            )


def test_explorer_accumulation_equals_the_big_batch(ex):
    assert ex.exact < 1e-12  # float64: the two differ by the order of a sum


def test_explorer_noise_falls_with_more_micro_batches(ex):
    for b in page.TOKENS:
        assert ex.noise[b][-1] < ex.noise[b][0]


def test_widget_prints_the_accumulation_widget_with_a_static_figure(ex):
    out = page.widget(ex)
    assert 'data-gf-widget="accumulation"' in out
    assert "<svg" in out


def test_inside_source_is_the_loop_of_accumulate_grad():
    block = page.inside_source()
    assert block.startswith("```python\ndef accumulate_grad_(model, micro_batches,")
    code = block.removeprefix("```python\n").removesuffix("\n```")
    loops = [n for n in ast.walk(ast.parse(code)) if isinstance(n, ast.For)]
    assert len(loops) == 1 and "loss.backward()" in ast.unparse(loops[0])
    assert "raise" not in code  # the argument checks are left out


def test_divisor_bug_norms_differ_by_the_number_of_micro_batches():
    right, wrong = page.divisor_bug_norms(accum_steps=4)
    torch.testing.assert_close(wrong / right, 4.0, rtol=1e-12, atol=0)


def test_divisor_bug_norms_explain_the_clipped_sgd_step():
    # SGD moves the weights by lr times the clipped gradient: the ratio of the two first steps
    # is the ratio of the two norms after clipping at 1.0
    right, wrong = page.divisor_bug_norms(accum_steps=4)
    clipped = divisor_bug_update_ratio("sgd", accum_steps=4, max_norm=1.0)
    torch.testing.assert_close(clipped, min(wrong, 1.0) / min(right, 1.0), rtol=1e-6, atol=0)


def test_divisor_bug_norms_rejects_zero_micro_batches():
    with pytest.raises(ValueError, match="divisor_bug_norms: `accum_steps`"):
        page.divisor_bug_norms(accum_steps=0)
