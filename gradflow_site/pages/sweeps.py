"""The frozen learning-rate and width sweeps of chapter 8, read for the pages that quote them.

tools/experiments/transformer_lr.py and transformer_width.py ran the `train` loop of
snippets/transformer.py; `record` loads their records through gradflow_site.records (which
refuses a stale one). Everything here is computed from a record: final losses per seed,
Wortsman et al.'s learning-rate sensitivity, the learning rates that train, the best learning
rate per width. docs/transformer.md draws them (gradflow_site/pages/transformer.py); the cheat
sheet quotes them (gradflow_site/pages/cheatsheet.py).
"""

from __future__ import annotations

import math
import statistics

from gradflow_site import records

__all__ = [
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
    "lr_range",
    "lr_sensitivity",
    "lrs_that_train",
    "median",
    "median_best_lr",
    "peak",
    "record",
    "runs",
    "spread",
]

# a learning rate "trains" when every seed ends within MARGIN nats of the baseline's best
# median final loss: as good as the baseline at its best, give or take a tenth of a nat
MARGIN = 0.1


def ceiling(rec: dict, margin: float = MARGIN) -> float:
    """Return the loss below which a run counts as trained: the baseline's best median + margin."""
    return min(median(v) for v in finals(rec, setting="baseline").values()) + margin


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
    medians = {lr: median(v) for lr, v in finals(rec, **match).items()}
    return min(medians, key=medians.__getitem__)


def above_best(rec: dict, lrs: list[float], **match) -> float:
    """Return how far above its best median loss the setting stayed at `lrs`: the least gap."""
    medians = [median(at(rec, "val", lr, **match)) for lr in lrs]
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


def median(values) -> float:
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
