"""Build side of docs/clipping.md: the clipping widget and its static figure, the outlier-batch
figure, and edge cases held against torch.

Every value is computed with gradflow_ref.clipping and torch.nn.utils at build time; the runs the
outlier figure draws come from the chapter's own snippet (snippets/clipping.py).
"""

from __future__ import annotations

import math

import torch

from gradflow_ref import clipping

__all__ = [
    "circle_figure",
    "negative_max_norm",
    "norm_of_norms",
    "spike_figure",
    "widget",
]

# what each panel of the outlier figure draws: (key of a run's log, y label, log scale)
SPIKE_PANELS = (
    ("norm", "gradient norm before clipping", True),
    ("loss", "test loss", True),
    ("step", "step per weight (RMS), in units of lr", False),
    ("lr_eff", "effective learning rate,\nrelative to the step before the outlier", True),
)


def _param(grad) -> torch.Tensor:
    p = torch.zeros(len(grad), requires_grad=True)
    p.grad = torch.tensor(grad, dtype=torch.float32)
    return p


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


def circle_figure(g: torch.Tensor, by_norm: torch.Tensor, by_value: torch.Tensor, c: float = 1.0):
    """Return a figure of gradient `g` clipped to `by_norm` and `by_value` at threshold `c`.

    Raises:
        ValueError: the three vectors are not 2-D, or `c` is not positive.
    """
    import matplotlib.pyplot as plt

    vectors = [v.detach().cpu().reshape(-1) for v in (g, by_norm, by_value)]
    if any(v.numel() != 2 for v in vectors) or not c > 0:
        raise ValueError(
            "circle_figure: `g`, `by_norm` and `by_value` must hold 2 elements each and `c` must "
            f"be positive, got sizes {[v.numel() for v in vectors]} and c={c}."
        )
    g, by_norm, by_value = vectors
    fig, ax = plt.subplots(figsize=(7, 3.6))
    theta = torch.linspace(0, 2 * math.pi, 200)
    ax.plot(c * theta.cos(), c * theta.sin(), color="0.5", lw=1, label=f"max_norm = {c:g} (circle)")
    ax.plot(
        [-c, c, c, -c, -c],
        [-c, -c, c, c, -c],
        color="0.5",
        lw=1,
        ls=":",
        label=f"clip_value = {c:g} (square)",
    )
    for v, color, label in [
        (g, "C3", f"gradient, length {g.norm():.2f}"),
        (by_norm, "C2", f"norm-clipped, turned {clipping.angle_between(g, by_norm):.1f}°"),
        (by_value, "C1", f"value-clipped, turned {clipping.angle_between(g, by_value):.1f}°"),
    ]:
        ax.annotate(
            "",
            xy=(v[0].item(), v[1].item()),
            xytext=(0, 0),
            arrowprops={"arrowstyle": "-|>", "color": color, "lw": 2},
        )
        ax.plot([], [], color=color, lw=2, label=label)
    reach = max(1.3 * c, float(g.abs().max()) + 0.3)
    ax.set_xlim(-1.3 * c, reach)
    ax.set_ylim(-1.3 * c, max(1.6 * c, reach * 0.6))
    ax.set_aspect("equal")
    ax.axhline(0, color="0.85", lw=0.8, zorder=0)
    ax.axvline(0, color="0.85", lw=0.8, zorder=0)
    ax.set_xlabel("gradient component 1")
    ax.set_ylabel("gradient component 2")
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    return fig


def widget(
    g: torch.Tensor, by_norm: torch.Tensor, by_value: torch.Tensor, threshold: float = 1.0
) -> str:
    """Return the clipping widget starting at gradient `g`; circle_figure is its static figure."""
    from gradflow_site.render import svg
    from gradflow_site.widgets import widget as make_widget

    data = {
        "start": [round(v, 4) for v in g.tolist()],
        "threshold": threshold,
        "extent": 3.0,
        "thresholds": [0.1, 3.0, 0.05],  # slider min, max, step
    }
    return make_widget("clipping", data, static=svg(circle_figure(g, by_norm, by_value, threshold)))


def spike_figure(runs: dict[str, list[dict[str, torch.Tensor]]], spike_at: int):
    """Return a 2x2 figure of the outlier-batch runs: median over seeds, min-max band.

    Args:
        runs: setting name -> one log per seed, each a dict of per-step 1-D tensors with the
            keys of SPIKE_PANELS (what snippets/clipping.py's `train` returns).
        spike_at: the step (0-based) that saw the outlier batch; its effective learning rate
            panel is drawn relative to the step before it.

    Raises:
        ValueError: `runs` is empty, a log lacks a key, or `spike_at` is outside the runs.
    """
    import matplotlib.pyplot as plt

    if not runs or not all(runs.values()):
        raise ValueError("spike_figure: `runs` must map each setting to at least one run's log.")
    for name, logs in runs.items():
        for log in logs:
            missing = [key for key, _, _ in SPIKE_PANELS if key not in log]
            if missing:
                raise ValueError(f"spike_figure: a run of {name!r} has no {missing} in its log.")
            if not 0 < spike_at < len(log["norm"]):
                raise ValueError(
                    f"spike_figure: `spike_at` must be a step inside the runs (1 to "
                    f"{len(log['norm']) - 1}), got {spike_at}."
                )
    fig, axes = plt.subplots(2, 2, figsize=(7, 5.2), sharex=True)
    for (key, label, log_scale), ax in zip(SPIKE_PANELS, axes.flat):
        for i, (name, logs) in enumerate(runs.items()):
            ys = torch.stack([log[key].double() for log in logs])
            if key == "lr_eff":
                ys = ys / ys[:, spike_at - 1 : spike_at]
            steps = torch.arange(1, ys.shape[1] + 1)
            low, high = ys.min(0).values, ys.max(0).values
            ax.fill_between(steps, low, high, color=f"C{i}", alpha=0.2, lw=0)
            ax.plot(steps, ys.median(0).values, color=f"C{i}", lw=1.2, label=name)
        ax.axvline(spike_at + 1, color="0.5", lw=0.8, ls=":")
        if log_scale:
            ax.set_yscale("log")
        ax.set_ylabel(label, fontsize=8)
    for ax in axes[1]:
        ax.set_xlabel("optimizer step")
    axes[0, 0].legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return fig
