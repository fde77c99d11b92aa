"""Build side of docs/transformer.md: the residual-stream widget and its static figure.

The profiles it draws are measured by the chapter's own snippet (snippets/transformer.py,
`grad_profile`): the gradient norm reaching each block's input, at initialisation, for every
depth, normalisation placement, init and QK-norm setting the widget offers. The static figure
is plain SVG written here (no matplotlib: the page's whole render has a 5 s budget).
"""

from __future__ import annotations

import html
import math

import torch

__all__ = ["AXES", "LABELS", "profile_figure", "training_figure", "widget", "widget_data"]

# (norm, depth_init) -> legend text and palette index, in drawing order
LABELS = {
    ("pre", True): ("pre-LN, depth init on", 0),
    ("pre", False): ("pre-LN, depth init off", 1),
    ("post", True): ("post-LN, depth init on", 2),
    ("post", False): ("post-LN, depth init off", 3),
}
_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")
# what training_figure can draw from a run's log: key -> y axis label
AXES = {
    "loss": "cross-entropy (nats)",
    "max_logit": "largest attention logit",
    "entropy": "mean attention entropy (nats)",
    "log_z": "log Z of the output logits",
}


def _check(profiles: dict, depths, name: str = "profiles") -> None:
    if not depths:
        raise ValueError("transformer page: `depths` must list at least one depth, got [].")
    for norm, depth_init in LABELS:
        for n in depths:
            p = profiles.get((norm, depth_init, n))
            if p is None:
                raise ValueError(
                    f"transformer page: `{name}` has no entry ({norm!r}, {depth_init}, {n}); "
                    "measure every norm, depth_init and depth the widget offers."
                )
            if len(p) != n or not all(math.isfinite(v) and v > 0 for v in torch.as_tensor(p)):
                raise ValueError(
                    f"transformer page: {name}[{norm!r}, {depth_init}, {n}] must hold {n} "
                    f"positive finite norms, got {len(p)} values."
                )


def widget_data(profiles: dict, qk_profiles: dict, depths) -> dict:
    """Return the widget's data: log10 of each block's gradient norm over block L's (3 decimals).

    Args:
        profiles: (norm, depth_init, depth) -> 1-D tensor of `depth` gradient norms, block 1
            first, for norm in ("pre", "post"), depth_init in (True, False), depth in `depths`.
        qk_profiles: the same, measured with QK-norm.
        depths: the depths the widget's slider offers.

    Raises:
        ValueError: a profile is missing, of the wrong length, or not positive and finite.
    """

    def log10(measured: dict, name: str) -> dict:
        _check(measured, depths, name)
        return {
            norm: {
                ("on" if depth_init else "off"): [
                    [round(math.log10(v / p[-1]), 3) for v in p]
                    for p in (
                        torch.as_tensor(measured[norm, depth_init, n]).tolist() for n in depths
                    )
                ]
                for depth_init in (True, False)
            }
            for norm in ("pre", "post")
        }

    by_qk_norm = {"off": log10(profiles, "profiles"), "on": log10(qk_profiles, "qk_profiles")}
    return {"depths": list(depths), "log10": by_qk_norm}


def _chart(series, x_range, x_ticks, x_label: str, y_label: str, alt: str, W: int = 640) -> str:
    """Return a log-y SVG line chart.

    `series`: (label, colour, dashed, [(x, log10 y)], band or None), band = [(x, low, high)] in
    log10 too; legend two to a row under the plot.
    """
    cols = 2 if W >= 600 else 1  # legend entries per row; a phone-width chart stacks them
    rows = (len(series) + cols - 1) // cols
    H, left, right, top, bottom = 290 + 16 * rows, 58, 12, 12, 50 + 16 * rows
    values = [
        v
        for *_, pts, band in series
        for v in [y for _, y in pts] + [w for b in (band or []) for w in b[1:]]
    ]
    lo, hi = min(-0.5, math.floor(min(values))), max(0.5, math.ceil(max(values)))
    x0, x1 = x_range
    sx = lambda x: left + (x - x0) / max(1e-9, x1 - x0) * (W - left - right)  # noqa: E731
    sy = lambda v: top + (hi - v) / (hi - lo) * (H - top - bottom)  # noqa: E731
    parts = [
        f'<rect x="{left}" y="{top}" width="{W - left - right}" height="{H - top - bottom}" '
        'fill="none" stroke="#999" stroke-width="0.8"/>'
    ]
    for e in range(math.ceil(lo), math.floor(hi) + 1):
        parts.append(
            f'<line x1="{left}" x2="{W - right}" y1="{sy(e):.1f}" y2="{sy(e):.1f}" stroke="#ddd"/>'
            f'<text x="{left - 6}" y="{sy(e) + 4:.1f}" text-anchor="end" font-size="11">'
            f"{10.0**e:g}</text>"
        )
    for t in x_ticks:
        parts.append(
            f'<text x="{sx(t):.1f}" y="{H - bottom + 16}" text-anchor="middle" '
            f'font-size="11">{t}</text>'
        )
    parts.append(
        f'<text x="{(left + W - right) / 2}" y="{H - bottom + 32}" text-anchor="middle" '
        f'font-size="12">{html.escape(x_label)}</text>'
        f'<text transform="rotate(-90)" x="{-(top + H - bottom) / 2}" y="14" '
        f'text-anchor="middle" font-size="12">{html.escape(y_label)}</text>'
    )
    for k, (label, color, dashed, pts, band) in enumerate(series):
        dash = ' stroke-dasharray="5 4"' if dashed else ""
        if band:
            ring = [(x, h) for x, _, h in band] + [(x, lo_) for x, lo_, _ in reversed(band)]
            outline = " ".join(f"{sx(x):.1f},{sy(v):.1f}" for x, v in ring)
            parts.append(f'<polygon points="{outline}" fill="{color}" fill-opacity="0.2"/>')
        line = " ".join(f"{sx(x):.1f},{sy(v):.1f}" for x, v in pts)
        parts.append(
            f'<polyline points="{line}" fill="none" stroke="{color}" stroke-width="2"{dash}/>'
        )
        lx, ly = left + (k % cols) * 290, H - 16 * rows + 4 + (k // cols) * 16
        parts.append(
            f'<line x1="{lx}" x2="{lx + 20}" y1="{ly}" y2="{ly}" stroke="{color}" '
            f'stroke-width="2"{dash}/>'
            f'<text x="{lx + 24}" y="{ly + 4}" font-size="11">{html.escape(label)}</text>'
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" role="img" '
        f'aria-label="{html.escape(alt)}" fill="currentColor" '
        f'style="max-width:100%;height:auto">{"".join(parts)}</svg>'
    )


def profile_figure(profiles: dict, depth: int) -> str:
    """Return an SVG line chart of the four profiles at `depth`, relative to block L, log scale.

    Raises:
        ValueError: a profile at `depth` is missing or not positive and finite.
    """
    _check(profiles, [depth])
    curves = {
        key: [math.log10(v / p[-1]) for v in p]
        for key, p in ((key, torch.as_tensor(profiles[(*key, depth)]).tolist()) for key in LABELS)
    }
    series = [
        (LABELS[key][0], _COLORS[LABELS[key][1]], not key[1], list(enumerate(c, 1)), None)
        for key, c in curves.items()
    ]
    ticks = sorted({1, depth, *range(0, depth + 1, max(1, depth // 6))} - {0})
    ratios = ", ".join(
        f"{LABELS[key][0]}: block 1 gets {10 ** c[0]:.3g} times block {depth}'s"
        for key, c in curves.items()
    )
    return _chart(
        series,
        (1, depth),
        ticks,
        f"block (1 = next to the embeddings, {depth} = next to the output)",
        "gradient norm / block L's",
        f"Gradient norm reaching each of {depth} blocks at initialisation. {ratios}.",
    )


def training_figure(runs: dict, key: str) -> str:
    """Return a figure of `key` over training steps: median of the seeds, lowest-highest band.

    Args:
        runs: legend label -> one log per seed, each a dict of per-step 1-D tensors (what
            snippets/transformer.py's `train` returns).
        key: the logged quantity to draw, one of AXES; drawn on a log scale.

    Raises:
        ValueError: `runs` is empty, or a log lacks `key` or holds a value that is not positive.
    """
    if key not in AXES:
        raise ValueError(f"training_figure: `key` must be one of {sorted(AXES)}, got {key!r}.")
    if not runs or not all(runs.values()):
        raise ValueError("training_figure: `runs` must map each label to at least one run's log.")
    y_label = AXES[key]
    series, ends = [], []
    for k, (label, logs) in enumerate(runs.items()):
        if any(key not in log for log in logs):
            raise ValueError(f"training_figure: a run of {label!r} has no {key!r} in its log.")
        ys = torch.stack([log[key].double() for log in logs])
        if not bool((ys > 0).all()):
            raise ValueError(
                f"training_figure: {key!r} of {label!r} must be positive for a log scale."
            )
        ys = ys.log10()
        med, low, high = ys.median(0).values, ys.min(0).values, ys.max(0).values
        steps = range(1, ys.shape[1] + 1)
        series.append(
            (
                label,
                _COLORS[k % len(_COLORS)],
                False,
                list(zip(steps, med.tolist())),
                list(zip(steps, low.tolist(), high.tolist())),
            )
        )
        ends.append(f"{label}: {10 ** med[-1].item():.3g} at the last step")
    n = len(series[0][3])
    alt = f"{y_label} over {n} training steps, median of {len(logs)} seeds. " + "; ".join(ends)
    ticks = sorted({1, *range(0, n + 1, max(1, n // 6))} - {0})
    wide = _chart(series, (1, n), ticks, "optimizer step", y_label, alt + ".")
    narrow = _chart(series, (1, n), ticks, "optimizer step", y_label, alt + ".", W=340)
    # CSS shows one of the two (gradflow.css): on a phone the text stays readable
    return (
        f'<figure class="gf-figure"><div class="gf-figure__wide">{wide}</div>'
        f'<div class="gf-figure__narrow">{narrow}</div></figure>'
    )


def widget(profiles: dict, qk_profiles: dict, depths, shown_depth: int = 48) -> str:
    """Return the residual-stream widget; without JavaScript, profile_figure at `shown_depth`."""
    from gradflow_site.widgets import widget as make_widget

    data = widget_data(profiles, qk_profiles, depths)
    return make_widget("transformer", data, static=profile_figure(profiles, shown_depth))
