"""Build side of docs/loss_scaling.md: the scaling-histogram and dynamic-scaling widget payloads.

`histogram` bins the page's real gradients on a log2 axis and counts, with torch's own FP16 cast,
what each loss scale 2^k leaves at zero, subnormal and inf. `replay` reruns the page's training
function with a GradScaler that records what step() and update() saw and did at every step.
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
    "histogram_widget",
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
    """Return the scaling_histogram payload for the nonzero gradients `nonzero`.

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


def histogram_widget(nonzero: torch.Tensor, fig) -> str:
    """Return the scaling_histogram widget, with `fig` as its static figure."""
    from gradflow_site.widgets import widget

    return widget("scaling_histogram", histogram(nonzero), static=svg(fig))


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


def dynamic_widget(train, scales, fig, corrupted, init_scale=2.0**16, growth_interval=10) -> str:
    """Return the dynamic_scaling widget for the run `train` makes; `fig` is its static figure."""
    from gradflow_site.widgets import rounded, widget

    recorder, losses = replay(train, scales, init_scale, growth_interval)
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
