"""Build side of docs/transformer.md: the residual-stream figure and the frozen sweeps' figures.

`profile_figure` draws what the chapter's snippet measures at build (snippets/transformer.py,
`grad_profile`): the gradient norm reaching each block's input at initialisation. The
learning-rate and width sweeps are too long for a build: their records are read by
gradflow_site/pages/sweeps.py (re-exported here, as the page calls them `page.<name>`), and the
tables and figures here draw what it computes. Figures are matplotlib, made inline SVG (with
their phone rendering) by gradflow_site.render.svg.
"""

from __future__ import annotations

import math
import statistics

import torch

from gradflow_site.pages.sweeps import (
    MARGIN,
    about,
    above_best,
    at,
    best_losses,
    best_lrs,
    ceiling,
    collapsed_from,
    finals,
    label,
    lr_range,
    lr_sensitivity,
    lrs_that_train,
    median_best_lr,
    peak,
    record,
    runs,
    spread,
)
from gradflow_site.render import plain_log_ticks, svg, table

__all__ = [
    "LABELS",
    "MARGIN",
    "about",
    "above_best",
    "at",
    "best_losses",
    "best_lrs",
    "ceiling",
    "collapsed_from",
    "finals",
    "label",
    "lr_figure",
    "lr_range",
    "lr_sensitivity",
    "lr_table",
    "lrs_that_train",
    "median_best_lr",
    "peak",
    "profile_figure",
    "record",
    "runs",
    "spread",
    "unigram_loss",
    "width_figure",
    "width_table",
]

# (norm, depth_init) -> legend text and palette index, in drawing order
LABELS = {
    ("pre", True): ("pre-LN, depth init on", 0),
    ("pre", False): ("pre-LN, depth init off", 1),
    ("post", True): ("post-LN, depth init on", 2),
    ("post", False): ("post-LN, depth init off", 3),
}
GREY = "0.55"  # the baseline in every panel of the learning-rate figure


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


def profile_figure(profiles: dict, depth: int) -> str:
    """Return a figure of the four profiles at `depth`, each relative to block L's, log scale.

    Dashed: depth-scaled init off.

    Raises:
        ValueError: a profile at `depth` is missing or not positive and finite.
    """
    import matplotlib.pyplot as plt

    _check(profiles, [depth])
    fig, ax = plt.subplots(figsize=(7, 3.4))
    blocks = range(1, depth + 1)
    for (norm, depth_init), (text, color) in LABELS.items():
        p = torch.as_tensor(profiles[norm, depth_init, depth]).double()
        ls = "-" if depth_init else "--"
        ax.plot(blocks, (p / p[-1]).tolist(), color=f"C{color}", ls=ls, label=text)
    ax.set_yscale("log")
    plain_log_ticks(ax)
    ax.set_xlabel(f"block (1 = next to the embeddings, {depth} = next to the output)")
    ax.set_ylabel("gradient norm / block L's")
    ax.legend(fontsize="small")  # one column: two are wider than a phone's axes
    return svg(fig)


def lr_table(rec: dict, ceiling: float) -> str:
    """Return the sweep's table: per setting, sensitivity and best loss (seeds), LRs that train."""
    settings = rec["config"]["settings"]
    rows = []
    for name, switches in settings.items():
        best = best_losses(rec, setting=name)
        rows.append(
            [
                label(switches),
                spread(lr_sensitivity(rec, setting=name)),
                spread(best, ".3f"),
                lr_range(lrs_that_train(rec, ceiling, setting=name)),
            ]
        )
    headers = [
        "setting",
        "LR sensitivity (nats)",
        "best final loss",
        f"LRs that train (all seeds below {ceiling:.2f})",
    ]
    return table(headers, rows, "lrrl")


def _band(ax, losses: dict[float, list[float]], cap: float, color, ring: bool = False) -> None:
    """Draw the median over seeds per learning rate and their range; a diverged seed at `cap`."""
    lrs = list(losses)
    values = [[cap if math.isnan(v) else v for v in losses[lr]] for lr in lrs]
    med = [statistics.median(v) for v in values]
    ax.fill_between(
        lrs, [min(v) for v in values], [max(v) for v in values], color=color, alpha=0.2, lw=0
    )
    ax.plot(lrs, med, color=color, lw=1.8)
    if ring:
        best = min(range(len(med)), key=med.__getitem__)
        ax.plot(lrs[best], med[best], "o", ms=10, mfc="none", mec=color, mew=1.5)


def _panels(n: int, title_y: str):
    """Return a figure of `n` panels sharing their axes, three to a row, and the panels."""
    import matplotlib.pyplot as plt

    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(7, 0.6 + 2.3 * rows), sharey=True)
    axes = list(getattr(axes, "flat", [axes]))
    for ax in axes[n:]:
        ax.remove()
    for ax in axes[:n]:
        ax.set_xscale("log")
        plain_log_ticks(ax)
        ax.set_xlabel("peak learning rate", fontsize=9)
    for ax in axes[:n:cols]:
        ax.set_ylabel(title_y, fontsize=9)
    return fig, axes[:n]


def lr_figure(rec: dict, floor: float | None = None) -> str:
    """Return a figure: final loss against peak learning rate, the baseline against each setting.

    One panel per setting other than the baseline: lines are the median of the seeds, bands
    their range; a diverged seed is drawn at the loss at initialisation. `floor`, if given, is
    drawn dotted: a loss that marks a failure (the byte frequencies' loss).
    """
    settings = {k: v for k, v in rec["config"]["settings"].items() if k != "baseline"}
    cap = statistics.median(r["initial"] for r in rec["runs"])
    fig, axes = _panels(len(settings), "final held-out loss (nats)")
    for ax, (name, switches) in zip(axes, settings.items()):
        _band(ax, finals(rec, setting="baseline"), cap, GREY)
        _band(ax, finals(rec, setting=name), cap, "C0")
        if floor is not None:
            ax.axhline(floor, color="0.3", lw=1, ls=":")
        ax.set_title(label(switches), fontsize=9)
    handles = [("baseline", GREY, "-"), ("the panel's setting", "C0", "-")]
    handles += [("byte frequencies", "0.3", ":")] if floor is not None else []
    for text, color, ls in handles:
        axes[0].plot([], [], color=color, ls=ls, label=text)
    fig.legend(loc="lower right", fontsize="small", frameon=False)
    fig.tight_layout()
    return svg(fig)


def width_figure(rec: dict) -> str:
    """Return a figure: final loss against learning rate at each width, standard and μP.

    Two panels, one line per width (median of the seeds, band their range); a ring marks the
    learning rate with the lowest median loss.
    """
    cap = statistics.median(r["initial"] for r in rec["runs"])
    fig, axes = _panels(2, "final held-out loss (nats)")
    for ax, (mup, title) in zip(axes, ((False, "standard: init 0.02, one LR"), (True, "μP"))):
        for k, width in enumerate(rec["config"]["widths"]):
            _band(ax, finals(rec, width=width, mup=mup), cap, f"C{k}", ring=True)
            ax.lines[-2].set_label(f"width {width}")
        ax.set_title(title, fontsize=9)
    axes[0].legend(fontsize="small")
    fig.tight_layout()
    return svg(fig)


def width_table(rec: dict) -> str:
    """Return the width sweep's table: per width and parametrisation, best LR and best loss."""
    rows = []
    for width in rec["config"]["widths"]:
        row = [str(width)]
        for mup in (False, True):
            lrs = best_lrs(rec, width=width, mup=mup)
            best = best_losses(rec, width=width, mup=mup)
            row += [", ".join(f"{lr:g}" for lr in lrs), spread(best, ".3f")]
        rows.append(row)
    headers = [
        "width",
        "standard: best LR per seed",
        "best loss",
        "μP: best LR per seed",
        "best loss",
    ]
    return table(headers, rows, "rlrlr")


def unigram_loss(train_data: torch.Tensor, val_windows: torch.Tensor) -> float:
    """Return the held-out loss of predicting every byte by its frequency in the training text."""
    p = torch.bincount(train_data, minlength=256).double()
    targets = val_windows[:, 1:].flatten()
    if (p[targets] == 0).any():
        raise ValueError("unigram_loss: a held-out byte never occurs in `train_data`.")
    return -(p[targets] / p.sum()).log().mean().item()
