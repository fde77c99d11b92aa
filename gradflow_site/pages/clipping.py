"""Build side of docs/clipping.md: the clipping widget, edge cases held against torch, the source.

Every value is computed with gradflow_ref.clipping and torch.nn.utils at build time.
"""

from __future__ import annotations

import inspect
import re

import torch

from gradflow_ref import clipping

__all__ = ["negative_max_norm", "norm_of_norms", "reference_source", "square_corner", "widget"]


def _param(grad) -> torch.Tensor:
    p = torch.zeros(len(grad), requires_grad=True)
    p.grad = torch.tensor(grad, dtype=torch.float32)
    return p


def square_corner(point=(0.9, 0.9), threshold: float = 1.0) -> tuple[float, float]:
    """Return the length of `point` after value clipping and after norm clipping at `threshold`."""
    by_value, by_norm = _param(point), _param(point)
    clipping.clip_grad_value_(by_value, clip_value=threshold)
    clipping.clip_grad_norm_(by_norm, max_norm=threshold)
    return by_value.grad.norm().item(), by_norm.grad.norm().item()


def negative_max_norm(grad=(3.0, 4.0), max_norm: float = -1.0) -> tuple[list[float], str]:
    """Return what torch's clip_grad_norm_ makes of `grad` at `max_norm`, and gradflow_ref's error.

    Raises:
        ValueError: gradflow_ref accepts `max_norm` (it is positive and finite).
    """
    flipped = _param(grad)
    torch.nn.utils.clip_grad_norm_(flipped, max_norm=max_norm)
    try:
        clipping.clip_grad_norm_(_param(grad), max_norm=max_norm)
    except ValueError as err:
        return flipped.grad.tolist(), str(err)
    raise ValueError(f"negative_max_norm: gradflow_ref accepted `max_norm` {max_norm!r}.")


def norm_of_norms(tensors=((1.0, 0.0, 2.0), (0.0, 5.0))) -> tuple[int, float, float]:
    """Return the count of non-zero elements and the total 0-norm in torch and gradflow_ref."""
    ts = [torch.tensor(t) for t in tensors]
    nonzero = sum(int((t != 0).sum()) for t in ts)
    theirs = torch.nn.utils.get_total_norm(ts, 0).item()
    return nonzero, theirs, clipping.get_total_norm(ts, 0).item()


def reference_source() -> str:
    """Return gradflow_ref's clip_grad_norm_ and the two functions it calls, docstrings removed,
    as a Markdown code block."""
    parts = []
    for fn in (clipping._total_norm, clipping.clip_grads_with_norm_, clipping.clip_grad_norm_):
        source = inspect.getsource(fn)
        parts.append(re.sub(r'\n    """.*?"""\n', "\n", source, count=1, flags=re.S).strip())
    return "```python\n" + "\n\n\n".join(parts) + "\n```"


def widget(g: torch.Tensor, fig, threshold: float = 1.0) -> str:
    """Return the clipping widget starting at gradient `g`, with `fig` as its static figure."""
    from gradflow_site.render import svg
    from gradflow_site.widgets import widget as make_widget

    data = {
        "start": [round(v, 4) for v in g.tolist()],
        "threshold": threshold,
        "extent": 3.0,
        "thresholds": [0.1, 3.0, 0.05],  # slider min, max, step
    }
    return make_widget("clipping", data, static=svg(fig))
