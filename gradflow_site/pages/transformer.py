"""Build side of docs/transformer.md: the residual-stream figure and the frozen sweeps.

`profile_figure` draws what the chapter's snippet measures at build (snippets/transformer.py,
`grad_profile`): the gradient norm reaching each block's input at initialisation, as plain SVG.
The learning-rate and width sweeps are too long for a build: tools/experiments/transformer_lr.py
and transformer_width.py ran the snippet's `train` loop, and the builders here read their
records through gradflow_site.records (which refuses a stale one) and compute everything the
page says from them: final losses, Wortsman et al.'s learning-rate sensitivity, the learning
rates that train, the best learning rate per width.
"""

from __future__ import annotations

import html
import math
import statistics

import torch

from gradflow_site import records
from gradflow_site.render import table

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
_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728")


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
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" '
        'role="img" '
        f'aria-label="{html.escape(alt)}" fill="currentColor" '
        f'style="max-width:100%;height:auto">{"".join(parts)}</svg>'
    )


def profile_figure(profiles: dict, depth: int) -> str:
    """Return a figure of the four profiles at `depth`, relative to block L, log scale.

    Two SVG line charts in one `<figure>`: 640 wide, and 340 wide for a phone (CSS shows one).

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
    x_label = f"block (1 = next to the embeddings, {depth} = next to the output)"
    alt = f"Gradient norm reaching each of {depth} blocks at initialisation. {ratios}."
    wide, narrow = (
        _chart(series, (1, depth), ticks, x_label, "gradient norm / block L's", alt, W=w)
        for w in (640, 340)
    )
    return (
        f'<figure class="gf-figure"><div class="gf-figure__wide">{wide}</div>'
        f'<div class="gf-figure__narrow">{narrow}</div></figure>'
    )


# --- the frozen sweeps (records of tools/experiments/transformer_lr.py and transformer_width.py)


# a learning rate "trains" when every seed ends within MARGIN nats of the baseline's best
# median final loss: as good as the baseline at its best, give or take a tenth of a nat
MARGIN = 0.1


def ceiling(rec: dict, margin: float = MARGIN) -> float:
    """Return the loss below which a run counts as trained: the baseline's best median + margin."""
    return min(_median(v) for v in finals(rec, setting="baseline").values()) + margin


def record(name: str) -> dict:
    """Return the record of experiment `name`, refused if stale (gradflow_site.records.load)."""
    return records.load(name)


def about(rec: dict) -> dict:
    """Return where and when `rec` ran, for the page to say: device, date, torch, minutes.

    The device without its kind: "cpu: Intel(R) Xeon(R) Processor, 1 thread" reads as
    "Intel(R) Xeon(R) Processor, 1 thread", "cuda: NVIDIA H100" as "NVIDIA H100".
    """
    return {
        "device": rec["device"].split(": ", 1)[-1],  # "cpu: X, 1 thread" -> "X, 1 thread"
        "date": rec["date"][:10],
        "torch": rec["versions"]["torch"],
        "minutes": rec["wall_seconds"] / 60,
        "command": rec["command"],
    }


def label(switches: dict) -> str:
    """Name a setting of the sweep by what it changes: {"qk_norm": True} -> "QK-norm"."""
    words = {
        "qk_norm": lambda v: "QK-norm" if v else "no QK-norm",
        "z_loss": lambda v: f"z-loss {v:g}",
        "warmup": lambda v: f"warmup {v} steps",
        "depth_init": lambda v: "depth-scaled init" if v else "no depth-scaled init",
        "norm": lambda v: f"{v}-LN",
    }
    unknown = sorted(set(switches) - set(words))
    if unknown:
        raise ValueError(f"label: no name for the switches {unknown}; add one to `words`.")
    return ", ".join(words[k](v) for k, v in switches.items()) or "baseline"


def runs(rec: dict, **match) -> list[dict]:
    """Return the runs of `rec` whose fields equal `match` (e.g. setting="qk_norm").

    μP at the base width is the standard parametrisation, so the width record ran it once:
    `mup=True` at that width returns those runs.

    Raises:
        ValueError: no run matches.
    """
    base = rec["config"].get("base_width")
    if match.get("mup") and match.get("width") == base:
        match = {**match, "mup": False}
    found = [r for r in rec["runs"] if all(r.get(k) == v for k, v in match.items())]
    if not found:
        raise ValueError(f"runs: no run of {rec['name']} has {match}.")
    return found


def finals(rec: dict, **match) -> dict[float, list[float]]:
    """Return learning rate -> final held-out loss per seed (NaN where a run diverged)."""
    out: dict[float, list[float]] = {}
    for r in sorted(runs(rec, **match), key=lambda r: (r["lr"], r["seed"])):
        out.setdefault(r["lr"], []).append(math.nan if r["val"] is None else r["val"])
    return out


def lr_sensitivity(rec: dict, **match) -> list[float]:
    """Return Wortsman et al.'s learning-rate sensitivity of each seed's sweep, in nats.

    For one seed, with final losses l(lr) on the sweep's learning rates and l0 the loss at
    initialisation: the mean over the learning rates of min(l(lr), l0), minus the best l(lr).
    A diverged run counts as l0. The learning rates are spaced evenly in log, so the mean is
    their expectation over a log-uniform range (arXiv:2309.14322, section 2.2).
    """
    by_seed: dict[int, list[tuple[float, float]]] = {}
    for r in runs(rec, **match):
        loss = r["val"] if r["val"] is not None and r["val"] < r["initial"] else r["initial"]
        by_seed.setdefault(r["seed"], []).append((r["lr"], loss))
    out = []
    for seed in sorted(by_seed):
        losses = [loss for _, loss in by_seed[seed]]
        out.append(statistics.fmean(losses) - min(losses))
    return out


def at(rec: dict, field: str, lr: float | list[float], **match) -> list[float]:
    """Return `field` of each seed's run at learning rate `lr` (or at each of a list, in turn).

    Of a curve, the last value: curves are kept per 10 steps (the loss's mean, the largest
    attention logit's maximum), so it covers the last 10 steps. NaN where the run diverged.
    """
    out = []
    for one in lr if isinstance(lr, list) else [lr]:
        for r in sorted(runs(rec, lr=one, **match), key=lambda r: r["seed"]):
            v = r[field][-1] if isinstance(r[field], list) else r[field]
            out.append(math.nan if v is None else v)
    return out


def peak(rec: dict, field: str, **match) -> float:
    """Return the largest value of `field` (a curve's last value) over every matching run."""
    return max(at(rec, field, sorted({r["lr"] for r in runs(rec, **match)}), **match))


def median_best_lr(rec: dict, **match) -> float:
    """Return the learning rate with the lowest median final loss over the seeds."""
    medians = {lr: _median(v) for lr, v in finals(rec, **match).items()}
    return min(medians, key=medians.__getitem__)


def above_best(rec: dict, lrs: list[float], **match) -> float:
    """Return how far above its best median loss the setting stayed at `lrs`: the least gap."""
    medians = [_median(at(rec, "val", lr, **match)) for lr in lrs]
    return min(medians) - statistics.median(best_losses(rec, **match))


def collapsed_from(rec: dict, loss: float, tol: float = 0.01, **match) -> float | None:
    """Return the lowest learning rate from which every seed, there and above, ended within
    `tol` of `loss` (e.g. the loss of predicting bytes by frequency); None if none did."""
    out = None
    for lr, values in sorted(finals(rec, **match).items(), reverse=True):
        if not all(abs(v - loss) < tol for v in values):
            break
        out = lr
    return out


def best_losses(rec: dict, **match) -> list[float]:
    """Return each seed's lowest final loss over the learning rates."""
    by_seed: dict[int, float] = {}
    for r in runs(rec, **match):
        if r["val"] is not None:
            by_seed[r["seed"]] = min(r["val"], by_seed.get(r["seed"], math.inf))
    return [by_seed[s] for s in sorted(by_seed)]


def best_lrs(rec: dict, **match) -> list[float]:
    """Return each seed's best learning rate: the one with the lowest final loss."""
    by_seed: dict[int, tuple[float, float]] = {}
    for r in runs(rec, **match):
        loss = math.inf if r["val"] is None else r["val"]
        if r["seed"] not in by_seed or loss < by_seed[r["seed"]][0]:
            by_seed[r["seed"]] = (loss, r["lr"])
    return [by_seed[s][1] for s in sorted(by_seed)]


def lrs_that_train(rec: dict, ceiling: float, **match) -> list[float]:
    """Return the learning rates at which every seed ended below `ceiling` nats."""
    return [
        lr
        for lr, losses in finals(rec, **match).items()
        if all(v < ceiling for v in losses)  # NaN compares False: a diverged run did not train
    ]


def _median(values) -> float:
    """Median with a diverged run (NaN) counted as the worst, not sorted at random."""
    return statistics.median(math.inf if math.isnan(v) else v for v in values)


def spread(values, fmt: str = ".3g") -> str:
    """Write values as "median (lowest-highest)"; a value of 1000 or more without decimals.

    The true median (the mean of the middle two of an even count), as the snippet's `spread`
    gives for the three seeds of one setting, also for values pooled over learning rates.
    """
    lo, med, hi = min(values), statistics.median(values), max(values)
    return "{} ({}-{})".format(
        *(f"{v:.0f}" if abs(v) >= 1000 else f"{v:{fmt}}" for v in (med, lo, hi))
    )


def lr_range(lrs: list[float]) -> str:
    """Write learning rates that train as a range: "0.001 to 0.01", "0.003 only" or "none"."""
    if not lrs:
        return "none"
    if len(lrs) == 1:
        return f"{lrs[0]:g} only"
    return f"{lrs[0]:g} to {lrs[-1]:g}"


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


def _median_band(losses: dict[float, list[float]], cap: float):
    """Median and range per learning rate, a diverged seed drawn at `cap` (the initial loss)."""
    lrs = list(losses)
    values = [[cap if math.isnan(v) else v for v in losses[lr]] for lr in lrs]
    return (
        lrs,
        [statistics.median(v) for v in values],
        [min(v) for v in values],
        [max(v) for v in values],
    )


def _initial(rec: dict) -> float:
    return statistics.median(r["initial"] for r in rec["runs"])


def _grid(panels, x_ticks, y_step: float, y_label: str, legend, alt: str, W: int) -> str:
    """Return an SVG of small line charts side by side: x is log10 of the learning rate.

    `panels`: (title, series); a series is (colour, dash, [(x, y)], band or None, ring or None)
    with band [(x, low, high)] and ring an (x, y) to circle. `legend`: (label, colour, dash)
    entries drawn once under the panels. Three panels to a row at 640 wide, one at 340.
    """
    cols = min(len(panels), 3 if W >= 600 else 1)
    rows = math.ceil(len(panels) / cols)
    left, right, gap, ph, head, foot = 50, 10, 14, 150, 22, 36
    pw = (W - left - right - gap * (cols - 1)) / cols
    n_legend = math.ceil(len(legend) / (3 if W >= 600 else 1))
    H = rows * (head + ph + foot) + 16 * n_legend + 8
    ys = [y for _, ser in panels for *_, pts, band, _ in ser for y in [p[1] for p in pts]]
    ys += [v for _, ser in panels for *_, band, _ in ser for b in band or [] for v in b[1:]]
    lo, hi = math.floor(min(ys) / y_step) * y_step, math.ceil(max(ys) / y_step) * y_step
    xs = [p[0] for _, ser in panels for *_, pts, _, _ in ser for p in pts]
    x0, x1 = min(xs + x_ticks) - 0.15, max(xs + x_ticks) + 0.15
    parts = []
    for k, (title, series) in enumerate(panels):
        ox, oy = left + (k % cols) * (pw + gap), (k // cols) * (head + ph + foot) + head

        def sx(x, ox=ox):
            return ox + (x - x0) / (x1 - x0) * pw

        def sy(y, oy=oy):
            return oy + (hi - y) / (hi - lo) * ph

        parts.append(
            f'<rect x="{ox:.1f}" y="{oy}" width="{pw:.1f}" height="{ph}" fill="none" '
            f'stroke="#999" stroke-width="0.8"/><text x="{ox + pw / 2:.1f}" y="{oy - 7}" '
            f'text-anchor="middle" font-size="12">{html.escape(title)}</text>'
        )
        for i in range(round((hi - lo) / y_step) + 1):
            y = lo + i * y_step
            parts.append(
                f'<line x1="{ox:.1f}" x2="{ox + pw:.1f}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" '
                'stroke="#ddd"/>'
            )
            if k % cols == 0:
                parts.append(
                    f'<text x="{ox - 5:.1f}" y="{sy(y) + 4:.1f}" text-anchor="end" '
                    f'font-size="10">{y:.1f}</text>'
                )
        for t in x_ticks:
            parts.append(
                f'<text x="{sx(t):.1f}" y="{oy + ph + 14}" text-anchor="middle" '
                f'font-size="10">{10.0**t:g}</text>'
            )
        for color, dash, pts, band, ring in series:
            if band:
                ring_pts = [(x, h) for x, _, h in band] + [(x, v) for x, v, _ in reversed(band)]
                outline = " ".join(f"{sx(x):.1f},{sy(v):.1f}" for x, v in ring_pts)
                parts.append(f'<polygon points="{outline}" fill="{color}" fill-opacity="0.2"/>')
            line = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
            style = f' stroke-dasharray="{dash}"' if dash else ""
            width = 1 if dash else 2
            parts.append(
                f'<polyline points="{line}" fill="none" stroke="{color}" '
                f'stroke-width="{width}"{style}/>'
            )
            if ring:
                parts.append(
                    f'<circle cx="{sx(ring[0]):.1f}" cy="{sy(ring[1]):.1f}" r="6" fill="none" '
                    f'stroke="{color}" stroke-width="1.5"/>'
                )
        parts.append(
            f'<text x="{ox + pw / 2:.1f}" y="{oy + ph + 28}" text-anchor="middle" '
            'font-size="11">peak learning rate</text>'
        )
    parts.append(
        f'<text transform="rotate(-90)" x="{-(head + ph / 2)}" y="12" text-anchor="middle" '
        f'font-size="11">{html.escape(y_label)}</text>'
    )
    per_row = 3 if W >= 600 else 1
    for i, (text, color, dash) in enumerate(legend):
        lx, ly = left + (i % per_row) * 190, rows * (head + ph + foot) + 4 + (i // per_row) * 16
        style = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(
            f'<line x1="{lx}" x2="{lx + 20}" y1="{ly}" y2="{ly}" stroke="{color}" '
            f'stroke-width="2"{style}/><text x="{lx + 24}" y="{ly + 4}" font-size="11">'
            f"{html.escape(text)}</text>"
        )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H:.0f}" width="{W}" '
        f'height="{H:.0f}" role="img" '
        f'aria-label="{html.escape(alt)}" fill="currentColor" '
        f'style="max-width:100%;height:auto">{"".join(parts)}</svg>'
    )


def _figure(panels, x_ticks, y_step, y_label, legend, alt) -> str:
    wide, narrow = (_grid(panels, x_ticks, y_step, y_label, legend, alt, W) for W in (640, 340))
    return (
        f'<figure class="gf-figure"><div class="gf-figure__wide">{wide}</div>'
        f'<div class="gf-figure__narrow">{narrow}</div></figure>'
    )


def _series(losses: dict[float, list[float]], cap: float, color: str, ring: bool = False):
    lrs, med, lo, hi = _median_band(losses, cap)
    xs = [math.log10(lr) for lr in lrs]
    best = min(range(len(med)), key=med.__getitem__)
    return (
        color,
        "",
        list(zip(xs, med)),
        list(zip(xs, lo, hi)),
        (xs[best], med[best]) if ring else None,
    )


def _x_ticks(rec: dict) -> list[int]:
    exps = [math.log10(lr) for lr in rec["config"]["lrs"]]
    return list(range(math.ceil(min(exps) - 1e-9), math.floor(max(exps) + 1e-9) + 1))


def lr_figure(rec: dict, floor: float | None = None) -> str:
    """Return a figure: final loss against peak learning rate, the baseline against each setting.

    One panel per setting other than the baseline: lines are the median of the seeds, bands
    their range; a diverged seed would be drawn at the loss at initialisation. `floor`, if
    given, is drawn dotted: a loss that marks a failure (the byte frequencies' loss).
    """
    settings = rec["config"]["settings"]
    cap = _initial(rec)
    base = _series(finals(rec, setting="baseline"), cap, "#888888")
    ticks = _x_ticks(rec)
    panels, ends = [], []
    for name in settings:
        if name == "baseline":
            continue
        series = [base, _series(finals(rec, setting=name), cap, _COLORS[0])]
        if floor is not None:
            edge = [(ticks[0], floor), (ticks[-1], floor)]
            series.append(("#555555", "2 3", edge, None, None))
        panels.append((label(settings[name]), series))
        best = median_best_lr(rec, setting=name)
        ends.append(f"{label(settings[name])}: best median at {best:g}")
    legend = [("baseline", "#888888", ""), ("the panel's setting", _COLORS[0], "")]
    if floor is not None:
        legend.append(("byte frequencies", "#555555", "2 3"))
    best = median_best_lr(rec, setting="baseline")
    alt = (
        "Final held-out loss against peak learning rate, one panel per change to the "
        f"baseline (best median at {best:g}); " + "; ".join(ends) + "."
    )
    return _figure(panels, ticks, 0.2, "final held-out loss (nats)", legend, alt)


def width_figure(rec: dict) -> str:
    """Return a figure: final loss against learning rate at each width, standard and μP.

    Two panels, one line per width (median of the seeds, band their range); a ring marks the
    learning rate with the lowest median loss.
    """
    widths = rec["config"]["widths"]
    cap = _initial(rec)
    panels, ends = [], []
    for mup, title in ((False, "standard: init 0.02, one LR"), (True, "μP")):
        series = [
            _series(finals(rec, width=w, mup=mup), cap, _COLORS[k], ring=True)
            for k, w in enumerate(widths)
        ]
        panels.append((title, series))
        ends.append(
            f"{title}: best median at "
            + ", ".join(f"{median_best_lr(rec, width=w, mup=mup):g} (width {w})" for w in widths)
        )
    legend = [(f"width {w}", _COLORS[k], "") for k, w in enumerate(widths)]
    alt = "Final held-out loss against peak learning rate at each width; " + "; ".join(ends)
    return _figure(panels, _x_ticks(rec), 0.1, "final held-out loss (nats)", legend, alt + ".")


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
