"""Build side of docs/accumulation.md: the accumulation widget's gradients and its static figure,
and the source of gradflow_ref's accumulation loop shown under "How it works inside".

`explorer` draws micro-batches from one pool of tokens, computes every micro-batch gradient of
the chapter's token classifier with gradflow_ref.accumulation, accumulates 1 to 16 of them and
projects everything onto two directions (the full-data gradient and the direction in which
micro-batch gradients vary most), so the browser only draws arrows and sums them.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

import torch

from gradflow_ref import _checks, accumulation
from gradflow_ref.accumulation import (
    accumulate_grad_,
    big_batch_grad_,
    flat_grad,
    make_micro_batches,
    make_model,
)

__all__ = [
    "COUNTS",
    "POOL_TOKENS",
    "TOKENS",
    "Explorer",
    "divisor_bug_norms",
    "explorer",
    "inside_source",
    "plane",
    "static_figure",
    "widget",
]

COUNTS = (1, 2, 4, 8, 16)  # micro-batches accumulated (the N slider)
TOKENS = (4, 8, 16, 32, 64, 128)  # tokens per micro-batch (the other slider)
POOL_TOKENS = 4096  # the "whole data set" every micro-batch is drawn from


@dataclass
class Explorer:
    data: dict  # the widget's payload (contract: tests/test_widgets_accumulation.py)
    params: int  # parameters of the model, the length of every gradient
    noise: dict  # tokens per micro-batch -> |accumulated - full| / |full|, one value per N
    exact: float  # largest |accumulated - big batch| / |big batch| over every cell
    micro_grads: dict  # tokens per micro-batch -> (16, params) micro-batch gradients
    plane: torch.Tensor  # (2, params): the projection, scaled so the full gradient is (1, 0)


def inside_source() -> str:
    """Return gradflow_ref's `accumulate_grad_` as a Markdown code block: a one-line signature,
    then the body from the loop's set-up on (the docstring and argument checks left out)."""
    fn = accumulation.accumulate_grad_
    params = ", ".join(  # the defaults in double quotes, as the body writes its strings
        str(p.replace(annotation=p.empty)).replace("'", '"')
        for p in inspect.signature(fn).parameters.values()
    )
    source = inspect.getsource(fn)
    body = source[source.index("    steps = len(micro_batches)") :].rstrip()
    return f"```python\ndef {fn.__name__}({params}):\n{body}\n```"


def divisor_bug_norms(
    accum_steps: int = 8, micro_batch_tokens: int = 16, seed: int = 0
) -> tuple[float, float]:
    """Return the first step's gradient norm with the divisor and without it.

    The same model and micro-batches as `accumulation.divisor_bug_update_ratio` with these
    arguments, so the norms say which of its two runs `max_norm` clips.

    Raises:
        ValueError: `accum_steps` or `micro_batch_tokens` below 1, or `seed` below 0.
    """
    _checks.integer("divisor_bug_norms", "accum_steps", accum_steps, fix="Pass e.g. 8.")
    _checks.integer("divisor_bug_norms", "micro_batch_tokens", micro_batch_tokens, fix="E.g. 16.")
    _checks.integer("divisor_bug_norms", "seed", seed, low=0)
    batches = make_micro_batches([micro_batch_tokens] * accum_steps, seed=seed + 1)
    norms = []
    for normalization in ("micro_mean", "none"):
        model = make_model(seed=seed)
        accumulate_grad_(model, batches, normalization)
        norms.append(flat_grad(model).norm().item())
    return norms[0], norms[1]


def plane(full: torch.Tensor, grads: torch.Tensor) -> torch.Tensor:
    """Return the (2, params) projection: the full gradient's direction, then the main spread.

    The rows are divided by |full| so that the full-data gradient lands on (1, 0).
    """
    u1 = full / full.norm()
    spread = grads - full
    spread = spread - (spread @ u1)[:, None] * u1
    u2 = torch.linalg.svd(spread, full_matrices=False).Vh[0]
    return torch.stack([u1, u2]) / full.norm()


def _draws(model, seed: int = 1):
    ((pool_x, pool_y),) = make_micro_batches([POOL_TOKENS])
    big_batch_grad_(model, [(pool_x, pool_y)])
    full = flat_grad(model).clone()
    gen = torch.Generator().manual_seed(seed)
    micro, grads = {}, {}
    for b in TOKENS:
        idx = [torch.randint(0, POOL_TOKENS, (b,), generator=gen) for _ in range(COUNTS[-1])]
        micro[b] = [(pool_x[i], pool_y[i]) for i in idx]
        rows = []
        for mb in micro[b]:
            accumulate_grad_(model, [mb])
            rows.append(flat_grad(model).clone())
        grads[b] = torch.stack(rows)
    return full, micro, grads


def explorer() -> Explorer:
    """Compute the widget's payload: every draw, every accumulation, every big batch."""
    model = make_model()
    full, micro, grads = _draws(model)
    proj = plane(full, torch.cat(list(grads.values())))
    rows = {k: [] for k in ("acc", "big", "exact", "noise")}
    for b in TOKENS:
        per_n = {k: [] for k in rows}
        for n in COUNTS:
            accumulate_grad_(model, micro[b][:n], normalization="micro_mean")
            acc = flat_grad(model).clone()
            big_batch_grad_(model, micro[b][:n])
            big = flat_grad(model).clone()
            per_n["acc"].append((proj @ acc).tolist())
            per_n["big"].append((proj @ big).tolist())
            per_n["exact"].append(((acc - big).norm() / big.norm()).item())
            per_n["noise"].append(((acc - full).norm() / full.norm()).item())
        for k in rows:
            rows[k].append(per_n[k])
    data = _payload(full.numel(), grads, proj, rows)
    return Explorer(
        data=data,
        params=full.numel(),
        noise={b: rows["noise"][i] for i, b in enumerate(TOKENS)},
        exact=max(max(r) for r in rows["exact"]),
        micro_grads=grads,
        plane=proj,
    )


def _payload(params: int, grads: dict, proj: torch.Tensor, rows: dict) -> dict:
    from gradflow_site.widgets import rounded

    arrows = torch.cat([g @ proj.T for g in grads.values()])
    lo, hi = arrows.min(0).values.tolist(), arrows.max(0).values.tolist()
    extent = {  # the plotted box in half units, with room for the heads and the origin
        "x": [math.floor(min(0, lo[0]) * 2) / 2 - 0.5, math.ceil(max(1, hi[0]) * 2) / 2 + 0.5],
        "y": [math.floor(min(0, lo[1]) * 2) / 2, math.ceil(max(0, hi[1]) * 2) / 2],
    }
    return {
        "counts": list(COUNTS),
        "tokens": list(TOKENS),
        "pool": POOL_TOKENS,
        "extent": extent,
        "params": params,
        "grads": [rounded((grads[b] @ proj.T).tolist()) for b in TOKENS],
        "acc": rounded(rows["acc"]),
        "big": rounded(rows["big"]),
        "exact": rounded(rows["exact"], 2),
        "noise": rounded(rows["noise"], 3),
    }


def static_figure(ex: Explorer, tokens: int = 4, n: int = 4):
    """Draw what a reader without JavaScript sees: `n` micro-batch gradients and their mean."""
    import matplotlib.pyplot as plt

    shown = ex.micro_grads[tokens][:n] @ ex.plane.T
    fig, ax = plt.subplots(figsize=(4.2, 3.6))
    for g in shown:
        ax.annotate("", g.tolist(), (0, 0), arrowprops={"arrowstyle": "->", "color": "#0072b2"})
    mean = ex.data["acc"][TOKENS.index(tokens)][COUNTS.index(n)]
    ax.annotate("", mean, (0, 0), arrowprops={"arrowstyle": "-|>", "color": "#d55e00", "lw": 2.5})
    ax.annotate("", (1, 0), (0, 0), arrowprops={"arrowstyle": "-|>", "color": "0.3", "ls": "--"})
    lim = max(1.5, shown.abs().max().item() * 1.1)
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    ax.axhline(0, color="0.8", lw=0.8)
    ax.axvline(0, color="0.8", lw=0.8)
    ax.set_title(
        f"{n} micro-batches of {tokens} tokens: gradients and their mean", fontsize="medium"
    )
    return fig


def widget(ex: Explorer) -> str:
    """Return the widget's HTML for the page to print (its title and caption are Markdown)."""
    from gradflow_site.render import svg
    from gradflow_site.widgets import widget as make_widget

    return make_widget("accumulation", ex.data, static=svg(static_figure(ex)))
