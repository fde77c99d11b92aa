"""Build side of docs/optimizer.md: the widget that adds a small update to a BF16 weight again
and again with each rounding method, its static figure, and the decay threshold table.

The widget's browser formulas (GF.logic.optimizer) are held against gradflow_ref.optimizer in
tests/test_widgets_optimizer.py; the static figure draws gradflow_ref.optimizer.trajectory.
The static figure is plain SVG written here (four polylines), so the page needs no plotting
library.
"""

from __future__ import annotations

import html

import torch

from gradflow_ref import optimizer

__all__ = ["WEIGHTS", "UPDATES", "LABELS", "decay_threshold", "trajectory_svg", "widget"]

WEIGHTS = [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0]  # weight slider
UPDATES = [1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2]  # update slider
LABELS = {
    "nearest": "round to nearest (w += u)",
    "stochastic": "stochastic rounding",
    "kahan": "Kahan-compensated",
    "master": "FP32 master",
}
COLORS = {"nearest": "#d62728", "stochastic": "#ff7f0e", "kahan": "#2ca02c", "master": "#1f77b4"}


def decay_threshold(weight: float) -> float:
    """Return the smallest lr * weight_decay at which decoupled decay changes BF16 `weight`.

    Decay multiplies the weight by (1 - lr * wd); rounded to nearest, the product stays at
    `weight` until the step `weight * lr * wd` exceeds half the gap to the next BF16 value
    towards zero (a tie rounds to the even neighbour).

    Raises:
        ValueError: `weight` is zero or not finite.
    """
    w = torch.tensor(weight, dtype=torch.bfloat16)
    if not (torch.isfinite(w) and w != 0):
        raise ValueError(f"decay_threshold: `weight` must be finite and non-zero, got {weight!r}.")
    below = torch.nextafter(w, torch.zeros_like(w))
    return float((w.double() - below.double()) / 2 / w.double().abs())


def _polyline(points, sx, sy, color, dash="") -> str:
    d = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
    style = f' stroke-dasharray="{dash}"' if dash else ""
    return f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="2"{style}/>'


def trajectory_svg(start: float = 1.0, update: float = 1e-4, steps: int = 1000) -> str:
    """Return an SVG of `start` plus `update`, `steps` times, per rounding method, and exact.

    Raises:
        ValueError: as gradflow_ref.optimizer.trajectory.
    """
    paths = {m: optimizer.trajectory(start, update, steps, m)[:, 0] for m in optimizer.METHODS}
    exact = [(0, start), (steps, start + steps * update)]
    values = [v for p in paths.values() for v in p.tolist()] + [y for _, y in exact]
    lo, hi = min(values), max(values)
    hi = hi if hi > lo else lo + 1
    width, height, left, right, top, bottom = 640, 300, 70, 190, 14, 44
    sx = lambda x: left + x / steps * (width - left - right)  # noqa: E731
    sy = lambda y: height - bottom - (y - lo) / (hi - lo) * (height - top - bottom)  # noqa: E731
    every = max(1, steps // 100)
    parts = [
        f'<rect x="{left}" y="{top}" width="{width - left - right}" '
        f'height="{height - top - bottom}" fill="none" stroke="#999"/>',
        _polyline(exact, sx, sy, "#777", "5 4"),
    ]
    for m, p in paths.items():
        pts = [(i, p[i].item()) for i in range(0, steps + 1, every)]
        parts.append(_polyline(pts, sx, sy, COLORS[m]))
    for k, (text, color) in enumerate(
        [("exact sum", "#777")] + [(LABELS[m], COLORS[m]) for m in optimizer.METHODS]
    ):
        y = top + 14 + 18 * k
        parts.append(
            f'<line x1="{width - right + 10}" x2="{width - right + 28}" y1="{y - 4}" '
            f'y2="{y - 4}" stroke="{color}" stroke-width="2"/><text x="{width - right + 32}" '
            f'y="{y}" font-size="11" fill="currentColor">{html.escape(text)}</text>'
        )
    for v in (lo, (lo + hi) / 2, hi):
        parts.append(
            f'<text x="{left - 6}" y="{sy(v) + 4:.1f}" text-anchor="end" font-size="11" '
            f'fill="currentColor">{v:.4g}</text>'
        )
    for s in (0, steps // 2, steps):
        parts.append(
            f'<text x="{sx(s):.1f}" y="{height - bottom + 16}" text-anchor="middle" '
            f'font-size="11" fill="currentColor">{s}</text>'
        )
    parts.append(
        f'<text x="{(left + width - right) / 2}" y="{height - 8}" text-anchor="middle" '
        f'font-size="12" fill="currentColor">step</text>'
    )
    mid = (top + height - bottom) / 2
    parts.append(
        f'<text x="14" y="{mid}" text-anchor="middle" font-size="12" fill="currentColor" '
        f'transform="rotate(-90 14 {mid})">weight</text>'
    )
    finals = ", ".join(f"{LABELS[m]} {p[-1].item():.5g}" for m, p in paths.items())
    label = (
        f"A BF16 weight of {start:g} plus {update:g} at each of {steps} steps; exact sum "
        f"{start + steps * update:.5g}; final values: {finals}."
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{html.escape(label)}" style="max-width:100%;height:auto">'
        f"<title>{html.escape(label)}</title>{''.join(parts)}</svg>"
    )


def widget(start: float = 1.0, update: float = 1e-4, steps: int = 1000) -> str:
    """Return the optimizer widget (a weight, an update size, the four methods' trajectories).

    Raises:
        ValueError: `start` is not in WEIGHTS or `update` not in UPDATES.
    """
    from gradflow_site.widgets import widget as make_widget

    if start not in WEIGHTS or update not in UPDATES:
        raise ValueError(
            f"widget: `start` must be one of {WEIGHTS} and `update` one of {UPDATES}, got "
            f"{start!r} and {update!r}."
        )
    data = {
        "weights": WEIGHTS,
        "updates": UPDATES,
        "start": start,
        "update": update,
        "steps": steps,
        "methods": list(optimizer.METHODS),
        "labels": LABELS,
    }
    return make_widget("optimizer", data, static=trajectory_svg(start, update, steps))
