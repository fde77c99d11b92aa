"""Build side of docs/loss_scaling.md: the late-training figure and the two widget payloads.

`late_training_figure` draws the chapter's runs (snippets/loss_scaling.py): loss and the share of
zero gradient elements per step, median over seeds with the min-max band. `histogram` bins the
page's logit gradients on a log2 axis and counts, with torch's own FP16 cast, what each loss
scale 2^k leaves at zero, subnormal and inf. `replay` reruns the page's classifier with a
GradScaler that records what step() and update() saw and did at every step.
"""

from __future__ import annotations

import math

import torch

from gradflow_ref.loss_scaling import GradScaler
from gradflow_ref.precision import FORMATS

__all__ = [
    "EXPONENTS",
    "RecordingScaler",
    "dynamic_widget",
    "fp16_counts",
    "histogram",
    "histogram_figure",
    "histogram_widget",
    "history_figure",
    "late_training_figure",
    "replay",
    "svg",
]

EXPONENTS = list(range(25))  # the histogram slider: loss scales 2^0 .. 2^24
FP16 = FORMATS["float16"]


def svg(fig) -> str:
    """Return `fig` as inline SVG for the page (render.svg; the caption names it)."""
    from gradflow_site.render import svg as render_svg

    return render_svg(fig)


def fp16_counts(g: torch.Tensor, k: int) -> dict[str, int]:
    """Return how many of `g * 2^k` torch's FP16 cast makes zero, subnormal and inf."""
    stored = (g * 2.0**k).half()
    return {
        "zero": int((stored == 0).sum()),
        "subnormal": int(((stored != 0) & (stored.abs() < FP16.min_normal)).sum()),
        "overflow": int(stored.isinf().sum()),
    }


def histogram(nonzero: torch.Tensor, exponents=EXPONENTS) -> dict:
    """Return the loss_scaling_histogram payload for the nonzero gradients `nonzero`.

    Bin i holds 2^((i-1)/4) < |g| <= 2^(i/4). The slivers count, per scale, the gradients just
    below FP16's smallest normal and just below 2^16, which FP16 rounds up to those values.

    Raises:
        ValueError: `nonzero` is empty or holds a zero, inf or NaN.
    """
    if nonzero.numel() == 0 or not bool((nonzero != 0).all() & nonzero.isfinite().all()):
        raise ValueError(
            "histogram: `nonzero` must hold finite nonzero gradients (g[g != 0]), got "
            f"{nonzero.numel()} values with zeros or inf/NaN."
        )
    g = nonzero.detach().cpu()
    magnitude = g.abs().double()
    bin_of = torch.ceil(magnitude.log2() * 4).long()
    first = int(bin_of.min())

    def sliver(top, bits):
        lo = top * (1 - 2.0**-bits)
        return [
            int(((magnitude >= lo / 2.0**k) & (magnitude <= top / 2.0**k)).sum()) for k in exponents
        ]

    counted = [fp16_counts(g, k) for k in exponents]
    return {
        "width": 0.25,
        "first": first,
        "counts": torch.bincount(bin_of - first).tolist(),
        "exponents": list(exponents),
        "total": g.numel(),
        "fp16": {name: [c[name] for c in counted] for name in ("zero", "subnormal", "overflow")},
        "sliver": {"normal": sliver(FP16.min_normal, 11), "inf": sliver(2.0**16, 12)},
        "limits": {
            "zero": math.log2(FP16.min_subnormal) - 1,
            "normal": math.log2(FP16.min_normal),
            "inf": math.log2(FP16.overflow_threshold),
        },
    }


def histogram_figure(nonzero: torch.Tensor, scaled: int = 16):
    """Return the no-JavaScript figure: log2 |g| unscaled and scaled by 2^`scaled`, FP16's zones."""
    import matplotlib.pyplot as plt

    data = histogram(nonzero)  # checks `nonzero`
    log2g = nonzero.detach().abs().double().log2().cpu()
    lo = math.floor(min(log2g.min().item(), data["limits"]["zero"])) - 2
    hi = max(math.ceil(log2g.max().item()) + scaled, math.ceil(data["limits"]["inf"])) + 2
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for k, colour in ((0, "C0"), (scaled, "C2")):
        ax.hist(
            log2g + k,
            bins=4 * (hi - lo),
            range=(lo, hi),
            histtype="stepfilled",
            alpha=0.6,
            color=colour,
            label=f"scale 2^{k}",
        )
    zero, normal, inf = (data["limits"][key] for key in ("zero", "normal", "inf"))
    ax.axvspan(lo, zero, color="C3", alpha=0.15, label="rounds to zero in FP16")
    ax.axvspan(zero, normal, color="C1", alpha=0.15, label="FP16 subnormal")
    ax.axvspan(inf, hi, color="0.3", alpha=0.12, label="overflows to inf")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("log2 |gradient x scale|")
    ax.set_ylabel("number of gradients")
    ax.legend(fontsize="small", frameon=False)
    fig.tight_layout()
    return fig


def histogram_widget(nonzero: torch.Tensor) -> str:
    """Return the loss_scaling_histogram widget, with `histogram_figure(nonzero)` as static."""
    from gradflow_site.widgets import widget

    return widget(
        "loss_scaling_histogram", histogram(nonzero), static=svg(histogram_figure(nonzero))
    )


class RecordingScaler(GradScaler):
    """GradScaler that records, for every step, what step() and update() saw and did."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.history = []

    def step(self, optimizer, *args, **kwargs):
        skipped = self.skipped_steps
        out = super().step(optimizer, *args, **kwargs)
        self.history.append({"scale": self.get_scale(), "inf": self.skipped_steps > skipped})
        return out

    def update(self, new_scale=None):
        super().update(new_scale)
        tracker = self.state_dict()["_growth_tracker"]
        self.history[-1].update(tracker=tracker, after=self.get_scale())


def replay(train, scales, init_scale=2.0**16, growth_interval=10) -> tuple[RecordingScaler, list]:
    """Rerun `train(scaler, steps)` with a RecordingScaler; return it and the run's losses.

    Raises:
        ValueError: the replay's scales differ from `scales`, the run the page shows.
    """
    recorder = RecordingScaler(init_scale=init_scale, growth_interval=growth_interval)
    _, losses = train(recorder, steps=len(scales))
    after = [h["after"] for h in recorder.history]
    if after != list(scales):
        first = next(i for i, (a, b) in enumerate(zip(after, scales)) if a != b)
        raise ValueError(
            f"replay: the recorded run differs from `scales` at step {first} "
            f"({after[first]} vs {scales[first]}); `train` must be deterministic."
        )
    return recorder, losses


def history_figure(scales, skipped, corrupted):
    """Return the no-JavaScript figure: log2 of the scale per step, skips as crosses.

    Args:
        scales: the scale after each step's update().
        skipped: the steps whose optimizer step was skipped.
        corrupted: the steps that saw a corrupted batch (dotted lines).
    """
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.step(range(len(scales)), [math.log2(s) for s in scales], where="post", label="log2 scale")
    marks = [math.log2(scales[s]) for s in skipped]
    ax.plot(skipped, marks, "x", color="C3", label="step skipped (inf/NaN gradient)")
    for s in corrupted:
        ax.axvline(s, color="0.5", linestyle=":", linewidth=1)
    ax.set_xlabel("step")
    ax.set_ylabel("log2 of the loss scale")
    ax.legend(fontsize="small", frameon=False)
    fig.tight_layout()
    return fig


def dynamic_widget(train, scales, corrupted, init_scale=2.0**16, growth_interval=10) -> str:
    """Return the dynamic_scaling widget for the run `train(scaler, steps)` makes.

    Raises:
        ValueError: rerunning `train` with a recording scaler does not give `scales`.
    """
    from gradflow_site.widgets import rounded, widget

    recorder, losses = replay(train, scales, init_scale, growth_interval)
    skipped = [i for i, h in enumerate(recorder.history) if h["inf"]]
    fig = history_figure(scales, skipped, corrupted)
    data = {
        "init_scale": init_scale,
        "growth_factor": recorder.get_growth_factor(),
        "backoff_factor": recorder.get_backoff_factor(),
        "growth_interval": growth_interval,
        "corrupted": list(corrupted),
        "scale": [h["scale"] for h in recorder.history],
        "inf": [int(h["inf"]) for h in recorder.history],
        "tracker": [h["tracker"] for h in recorder.history],
        "after": [h["after"] for h in recorder.history],
        "loss": rounded(losses, 4),
    }
    return widget("dynamic_scaling", data, static=svg(fig))


LINES = ("-", "-", "--", ":")  # per precision, so that runs drawn on top of each other show


def _band(ax, steps, ys: torch.Tensor, colour, label, line="-"):
    """Draw the median over seeds (rows of `ys`) and the min-max band."""
    ax.fill_between(steps, ys.min(0).values, ys.max(0).values, color=colour, alpha=0.25, lw=0)
    ax.plot(steps, ys.median(0).values, line, color=colour, lw=1.4, label=label)


def late_training_figure(early, runs, tokens: int):
    """Return the figure of the late-training runs: loss on top, zero gradient share below.

    Args:
        early: one (losses, zeros) per seed, the FP32 steps before the runs part.
        runs: precision name -> one (losses, zeros) per seed, the steps after.
        tokens: tokens the loss averages over; the line N * 2^-25 marks where a token's largest
            logit gradient, about its loss / N, rounds to zero in FP16.

    Raises:
        ValueError: `runs` is empty, or a precision has not one run per seed of `early`.
    """
    import matplotlib.pyplot as plt

    from gradflow_site.render import plain_log_ticks

    if not early or not runs or any(len(seeds) != len(early) for seeds in runs.values()):
        raise ValueError(
            "late_training_figure: `runs` must map each precision to one (losses, zeros) per "
            f"seed of `early` ({len(early)} seeds), got {[len(v) for v in runs.values()]}."
        )
    n_early = len(early[0][0])
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(7, 5), sharex=True, gridspec_kw={"height_ratios": [2, 1]}
    )
    steps = torch.arange(1, n_early + 1)
    for ax, k in ((top, 0), (bottom, 1)):
        ys = torch.tensor([run[k] for run in early], dtype=torch.float64)
        _band(ax, steps, ys * (100 if k else 1), "0.45", "FP32, before the runs part")
    for i, (name, seeds) in enumerate(runs.items()):
        steps = torch.arange(n_early + 1, n_early + len(seeds[0][0]) + 1)
        for ax, k in ((top, 0), (bottom, 1)):
            ys = torch.tensor([run[k] for run in seeds], dtype=torch.float64)
            _band(ax, steps, ys * (100 if k else 1), f"C{i}", name, LINES[i % len(LINES)])
    top.axhline(tokens * 2.0**-25, color="0.3", lw=0.8, ls="--")
    top.annotate(
        f"N × 2⁻²⁵, N = {tokens} tokens",
        (1, tokens * 2.0**-25),
        xytext=(0, 3),
        textcoords="offset points",
        fontsize=8,
        color="0.3",
    )
    for ax in (top, bottom):
        ax.axvline(n_early + 0.5, color="0.5", lw=0.8, ls=":")
    top.set_yscale("log")
    top.set_ylabel("loss")
    top.legend(fontsize=8, frameon=False, loc="upper right")
    bottom.set_ylabel("zero gradient\nelements (%)")
    bottom.set_ylim(-3, 103)
    bottom.set_xlabel("optimizer step")
    plain_log_ticks(top)
    fig.tight_layout()
    return fig
