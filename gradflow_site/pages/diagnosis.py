"""Build side of docs/diagnosis.md: the gallery of failures and remedies, read from its record.

The gallery's runs are too long for a build. tools/experiments/diagnosis_gallery.py trains every
setting with the page's own `train` (snippets/diagnosis.py) over five seeds, and `gallery()`
returns its record through `records.load`, which refuses a stale one. A run's result is its
held-out loss after 300 steps; a diverged run (None in the record) is worse than any number.
Two settings compare by their seed ranges: one did better only if every one of its seeds ended
below every seed of the other; ranges that overlap are no difference.
"""

from __future__ import annotations

import math
import statistics

from gradflow_site import records

__all__ = [
    "NAME",
    "SIGNALS",
    "gallery",
    "finals",
    "compare",
    "verdict",
    "harm",
    "spread",
    "per_seed",
    "summary",
    "unigram_loss",
    "call",
    "setup_table",
    "results_table",
    "figure",
    "widget_data",
    "widget",
]

NAME = "diagnosis_gallery"
# signal -> (axis label, log scale); the record keeps each per window of 10 steps
SIGNALS = {
    "loss": ("training loss (mean of 10 steps)", False),
    "norm": ("gradient norm before clipping (largest of 10 steps)", True),
    "logit": ("largest attention logit (of 10 steps)", True),
}
# failure -> (the signal that shows it, what its lasting harm is measured against: the healthy
# run where the failure is an event in an otherwise healthy run, else the remedy's run, the same
# run without the failure)
FAILURES = {
    "corrupt shard": ("loss", "healthy"),
    "learning rate too high": ("loss", "healthy"),
    "missing warmup": ("loss", "remedy"),
    "missing divisor": ("norm", "remedy"),
    "attention-logit growth": ("logit", "remedy"),
}


def gallery(root=None) -> dict:
    """Return the gallery's record, checked against the code that made it (records.load).

    Raises:
        ValueError: the record's failures are not FAILURES (the page discusses each by name).
    """
    record = records.load(NAME, root)
    if list(record["config"]["rows"]) != list(FAILURES):
        raise ValueError(
            f"diagnosis: the record's failures are {list(record['config']['rows'])}, the page's "
            f"{list(FAILURES)}; update FAILURES and docs/diagnosis.md together."
        )
    return record


def _setting(failure: str, which: str) -> str:
    if which not in ("healthy", "fail", "fix"):
        raise ValueError(f"diagnosis: `which` must be 'healthy', 'fail' or 'fix', got {which!r}.")
    return {"healthy": "healthy", "fail": failure, "fix": f"{failure}: remedy"}[which]


def _runs(record: dict, failure: str, which: str) -> list[dict]:
    setting = _setting(failure, which)
    runs = [r for r in record["runs"] if r["setting"] == setting]
    if not runs:
        raise ValueError(f"diagnosis: the record has no runs of {setting!r}.")
    return sorted(runs, key=lambda r: r["seed"])


def finals(record: dict, failure: str, which: str) -> list[float]:
    """Return the held-out loss of each seed of one run (`which`: 'healthy', 'fail', 'fix');
    inf for a run that diverged."""
    return [math.inf if r["val"] is None else r["val"] for r in _runs(record, failure, which)]


def compare(a: list[float], b: list[float]) -> str:
    """Return 'lower' if every value of `a` is below every one of `b`, 'higher' if above,
    'overlapping' otherwise (seed ranges that overlap, or touch)."""
    if max(a) < min(b):
        return "lower"
    if min(a) > max(b):
        return "higher"
    return "overlapping"


def verdict(record: dict, failure: str) -> str:
    """Return what the remedy did to the held-out loss: 'helped', 'no difference' or 'hurt'."""
    side = compare(finals(record, failure, "fix"), finals(record, failure, "fail"))
    return {"lower": "helped", "higher": "hurt", "overlapping": "no difference"}[side]


def harm(record: dict, failure: str) -> bool:
    """Return whether the failure did lasting harm: every seed's held-out loss above every seed
    of its reference run (FAILURES: the healthy run, or the remedy's)."""
    reference = "healthy" if FAILURES[failure][1] == "healthy" else "fix"
    return compare(finals(record, failure, "fail"), finals(record, failure, reference)) == "higher"


def spread(values: list[float], digits: int = 3, whole: bool = False) -> str:
    """Return 'median (lowest–highest)' to `digits` significant digits (`whole`: as integers),
    or the one value when every seed has it; a diverged (inf) value reads 'diverged'."""

    def f(x: float) -> str:
        if math.isinf(x):
            return "diverged"
        return str(round(x)) if whole else f"{x:#.{digits}g}".rstrip(".")

    if min(values) == max(values):
        return f(values[0])
    return f"{f(statistics.median(values))} ({f(min(values))}–{f(max(values))})"


def per_seed(record: dict, failure: str, which: str, key: str, reduce=max) -> list[float]:
    """Return, per seed, `reduce` over one run's windows of signal `key` (or 'skipped'), with
    windows whose value was not finite left out (inf if none is finite)."""
    out = []
    for r in _runs(record, failure, which):
        values = [x for x in r[key] if x is not None]
        out.append(reduce(values) if values else math.inf)
    return out


def summary(record: dict) -> dict:
    """Return what the page writes of each failure, as text: held-out losses of the failing run
    and the remedy ('fail', 'fix'), 'harm' ('yes'/'no'), the remedy's 'verdict', the signal
    that shows the failure, largest ('peak_fail', 'peak_fix') and typical ('typical_fail',
    'typical_fix': median over windows and seeds), the remedy's skipped steps per seed, and
    where the remedy's losses lie against the healthy run's ('fix_vs_healthy': 'below',
    'within' or 'above'); 'healthy' is the healthy run's held-out loss."""
    out = {"healthy": spread(finals(record, next(iter(FAILURES)), "healthy"))}
    for name, (key, _) in FAILURES.items():
        row = {"harm": "yes" if harm(record, name) else "no", "verdict": verdict(record, name)}
        for which in ("fail", "fix"):
            typical = statistics.median(per_seed(record, name, which, key, statistics.median))
            row[which] = spread(finals(record, name, which))
            row[f"peak_{which}"] = spread(per_seed(record, name, which, key))
            row[f"typical_{which}"] = f"{typical:.3g}"
        row["skipped"] = spread(per_seed(record, name, "fix", "skipped", sum), whole=True)
        side = compare(finals(record, name, "fix"), finals(record, name, "healthy"))
        row["fix_vs_healthy"] = {"lower": "below", "higher": "above", "overlapping": "within"}[side]
        out[name] = row
    return out


def unigram_loss(train_tokens, held_out_tokens) -> float:
    """Return the held-out cross-entropy, in nats, of predicting every byte from the training
    text's byte frequencies alone: the loss of a model that ignores the context."""
    import torch

    counts = torch.bincount(train_tokens, minlength=256).double()
    seen = torch.bincount(held_out_tokens, minlength=256).double()
    if (seen[counts == 0] > 0).any():
        raise ValueError("unigram_loss: a held-out byte never occurs in the training tokens.")
    p = counts / counts.sum()
    return float(-(seen[seen > 0] * p[seen > 0].log()).sum() / seen.sum())


def call(kwargs: dict) -> str:
    """Return `train(seed, ...)` with `kwargs` as Python, a run of steps as range(a, b)."""

    def value(v) -> str:
        if isinstance(v, list) and v == list(range(v[0], v[0] + len(v))):
            return f"range({v[0]}, {v[0] + len(v)})"
        return f'"{v}"' if isinstance(v, str) else repr(v)

    return "train(" + ", ".join(["seed", *(f"{k}={value(v)}" for k, v in kwargs.items())]) + ")"


def setup_table(record: dict) -> str:
    """Return the Markdown table of how each failure and its remedy are run."""
    from gradflow_site.render import table

    rows = [
        [name, f"`{call(fail)}`", f"`{call(fix)}`"]
        for name, (fail, fix) in record["config"]["rows"].items()
    ]
    return table(["Failure", "Failing run", "Remedy"], rows)


def results_table(record: dict) -> str:
    """Return the Markdown table of held-out losses, lasting harm and what each remedy did."""
    from gradflow_site.render import table

    rows = []
    for name in FAILURES:
        against = "healthy run" if FAILURES[name][1] == "healthy" else "remedy"
        rows.append(
            [
                name,
                spread(finals(record, name, "fail")),
                f"{'yes' if harm(record, name) else 'no'} (against the {against})",
                spread(finals(record, name, "fix")),
                f"**{verdict(record, name)}**",
            ]
        )
    headers = ["Failure", "Held-out loss", "Lasting harm", "With the remedy", "The remedy"]
    return table(headers, rows, "lrlrl")


def _median_curves(record: dict, failure: str, which: str, key: str) -> list[float]:
    runs = _runs(record, failure, which)
    columns = zip(*(r[key] for r in runs))
    return [statistics.median(math.nan if v is None else v for v in col) for col in columns]


def figure(record: dict):
    """Return the figure shown without JavaScript: each failure's signal, median of the seeds,
    for the failing run, the remedy and the healthy run."""
    import matplotlib.pyplot as plt

    from gradflow_site.render import plain_log_ticks

    every = record["config"]["every"]
    fig, axes = plt.subplots(1, len(FAILURES), figsize=(12, 2.8))
    for ax, (name, (key, _)) in zip(axes, FAILURES.items()):
        for which, style, label in (
            ("healthy", dict(color="0.6", lw=1), "healthy"),
            ("fail", dict(color="C3", lw=1.6), "failure"),
            ("fix", dict(color="C0", lw=1.6, ls="--"), "remedy"),
        ):
            y = _median_curves(record, name, which, key)
            ax.plot([every * (i + 1) for i in range(len(y))], y, label=label, **style)
        ax.set_yscale("log" if SIGNALS[key][1] else "linear")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.set_ylabel(key, fontsize=8)
        ax.tick_params(labelsize=7)
        plain_log_ticks(ax)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def widget_data(record: dict) -> dict:
    """Return the widget's data: every seed's curves of the failing run, the remedy and the
    healthy run per failure (None where a window was inf/NaN), and each remedy's verdict."""
    from gradflow_site.widgets import rounded

    def curves(name: str, which: str) -> dict:
        runs = _runs(record, name, which)
        return {key: rounded([r[key] for r in runs]) for key in SIGNALS}

    return {
        "every": record["config"]["every"],
        "signals": {k: [label, log] for k, (label, log) in SIGNALS.items()},
        "healthy": curves(next(iter(FAILURES)), "healthy"),
        "failures": [
            {
                "name": name,
                "signature": key,
                "verdict": verdict(record, name),
                "fail": curves(name, "fail"),
                "fix": curves(name, "fix"),
                "skipped": [sum(r["skipped"]) for r in _runs(record, name, "fix")],
            }
            for name, (key, _) in FAILURES.items()
        ],
    }


def widget(record: dict) -> str:
    """Return the diagnosis widget (pick a failure and a signal); figure() is what a reader
    without JavaScript sees."""
    from gradflow_site.render import svg
    from gradflow_site.widgets import widget as make_widget

    return make_widget("diagnosis", widget_data(record), static=svg(figure(record)))
