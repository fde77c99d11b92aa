"""Build side of docs/arena.md: the frozen race, read from its record.

tools/experiments/arena.py ran the race of snippets/arena.py (every recipe, every seed, through
snippets/train.py) and wrote results/frozen/arena.json: per run, the recipe, the seed, the
held-out loss after the last step (`val`, None where it was inf or NaN), the training loss and
the largest gradient norm per 10 steps, the clipped and skipped steps, and whether its log
equalled the full recipe's of the same seed at every step. This module says how each recipe's
range over the seeds lies against the full recipe's, and draws and tabulates the race.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

from gradflow_site import records
from gradflow_site.pages import sweeps
from gradflow_site.pages.sweeps import about
from gradflow_site.render import table as markdown_table

__all__ = [
    "NAME",
    "about",
    "apart",
    "byte_entropy",
    "curves",
    "differences",
    "every_seed",
    "figure",
    "finals",
    "gap",
    "listing",
    "paired",
    "record",
    "runs",
    "same",
    "spread",
    "table",
    "total",
    "verdict",
]

NAME = "arena"
ROOT = Path(__file__).resolve().parents[2]
WORDS = {"below": "lower", "above": "higher", "overlapping": "overlaps"}


def spread(values, fmt: str = ".3f") -> str:
    """Write values as "median (lowest-highest)", or as the one value every seed had."""
    return f"{values[0]:{fmt}}" if min(values) == max(values) else sweeps.spread(values, fmt)


def byte_entropy(text: str = "snippets/shakespeare.txt") -> float:
    """Return the loss, in nats, of predicting each byte of train.py's training split (the first
    nine tenths of `text`) by its frequency there: a model that ignores the context."""
    import torch

    data = torch.frombuffer(bytearray((ROOT / text).read_bytes()), dtype=torch.uint8).long()
    p = torch.bincount(data[: int(0.9 * len(data))], minlength=256).double()
    p = p[p > 0] / p.sum()
    return -(p * p.log()).sum().item()


def record(root=None) -> dict:
    """Return the race's record, refused if stale (gradflow_site.records.load)."""
    return records.load(NAME, root)


def runs(rec: dict, recipe: str) -> list[dict]:
    """Return the runs of `recipe`, by seed.

    Raises:
        ValueError: the record has no run of that recipe.
    """
    found = sorted((r for r in rec["runs"] if r["recipe"] == recipe), key=lambda r: r["seed"])
    if not found:
        known = list(rec["config"]["recipes"])
        raise ValueError(f"arena: no runs of recipe {recipe!r}; the recipes are {known}.")
    return found


def finals(rec: dict, recipe: str) -> list[float]:
    """Return each seed's held-out loss after the last step (NaN where it was inf or NaN)."""
    return [math.nan if r["val"] is None else r["val"] for r in runs(rec, recipe)]


def total(rec: dict, recipe: str, field: str) -> list[int]:
    """Return each seed's count of `field` ("clipped" or "skipped" steps)."""
    return [r[field] for r in runs(rec, recipe)]


def verdict(rec: dict, recipe: str, against: str = "full") -> str:
    """Return how `recipe`'s held-out losses lie against `against`'s, over the seeds.

    "diverged" when a seed of it ended inf or NaN (a NaN is no loss to compare); "below" when
    every seed ended lower than every seed of `against`; "above" for the reverse; "overlapping"
    otherwise: then the seed alone could make the difference.
    """
    mine, theirs = finals(rec, recipe), finals(rec, against)
    if any(map(math.isnan, mine)):
        return "diverged"
    if any(map(math.isnan, theirs)):
        raise ValueError(f"verdict: `against` {against!r} has a diverged seed; pick another.")
    if max(mine) < min(theirs):
        return "below"
    if min(mine) > max(theirs):
        return "above"
    return "overlapping"


def apart(rec: dict, side: str, against: str = "full") -> list[str]:
    """Return the recipes whose verdict against `against` is `side` ("above", "below",
    "overlapping" or "diverged"), in the race's order."""
    sides = ("above", "below", "overlapping", "diverged")
    if side not in sides:
        raise ValueError(f"apart: `side` must be one of {sides}, got {side!r}.")
    names = [n for n in rec["config"]["recipes"] if n != against]
    return [n for n in names if verdict(rec, n, against) == side]


def listing(names) -> str:
    """Return `names` as "a, b and c", or "none" when there are none."""
    names = list(names)
    if len(names) < 2:
        return names[0] if names else "none"
    return ", ".join(names[:-1]) + " and " + names[-1]


def same(rec: dict) -> list[str]:
    """Return the recipes whose log equalled the full recipe's at every step of every seed."""
    names = [n for n in rec["config"]["recipes"] if n != "full"]
    return [n for n in names if all(r["same_as_full"] for r in runs(rec, n))]


def paired(rec: dict, recipe: str, against: str = "full") -> list[float]:
    """Return each seed's held-out loss minus `against`'s with the same seed (same initial
    weights, same batches): the recipe's own doing, seed by seed."""
    return [a - b for a, b in zip(finals(rec, recipe), finals(rec, against))]


def every_seed(rec: dict, side: str, against: str = "full") -> list[str]:
    """Return the recipes that ended "higher" (or "lower") than `against` with every seed."""
    if side not in ("higher", "lower"):
        raise ValueError(f"every_seed: `side` must be 'higher' or 'lower', got {side!r}.")
    sign = 1 if side == "higher" else -1
    names = [n for n in rec["config"]["recipes"] if n != against]
    return [n for n in names if all(sign * d > 0 for d in paired(rec, n, against))]


def gap(rec: dict, recipe: str, against: str = "full") -> float:
    """Return the largest difference in held-out loss between `recipe` and `against` with the
    same seed (0.0 where every seed ended exactly equal)."""
    return max(abs(d) for d in paired(rec, recipe, against))


def differences(values: list[float]) -> str:
    """Write paired differences as a signed range to two significant digits (trailing zeros
    kept: "+0.30"), or "0, every seed" where every one is exactly 0."""
    if all(d == 0 for d in values):
        return "0, every seed"
    low, high = min(values), max(values)
    return f"{low:+#.2g}" if low == high else f"{low:+#.2g} to {high:+#.2g}"


def table(rec: dict, against: str = "full") -> str:
    """Return the race as a Markdown table: per recipe, its held-out loss (median and range over
    the seeds), how that range lies against `against`'s, the differences from `against` with
    the same seed, and its clipped and skipped steps per seed."""
    rows = []
    for name in rec["config"]["recipes"]:
        ends = finals(rec, name)
        finite = [v for v in ends if not math.isnan(v)]
        loss = spread(finite, ".3f") if finite else "–"
        if n := len(ends) - len(finite):
            loss += f", inf/NaN ×{n}"
        side = WORDS.get(verdict(rec, name, against), "diverged")
        rows.append(
            [
                name,
                loss,
                "–" if name == against else side,
                "–" if name == against else differences(paired(rec, name, against)),
                spread(total(rec, name, "clipped"), ".0f"),
                spread(total(rec, name, "skipped"), ".0f"),
            ]
        )
    headers = ["recipe", "held-out loss", f"vs {against}", f"minus {against}, same seed"]
    headers += ["clipped steps", "skipped steps"]
    return markdown_table(headers, rows, "lrlrrr")


def curves(rec: dict, recipe: str, field: str = "loss") -> list[float]:
    """Return the median over the seeds of a per-10-step curve (`loss` or `grad_norm`)."""
    columns = zip(*(r[field] for r in runs(rec, recipe)))
    return [statistics.median(math.nan if v is None else v for v in col) for col in columns]


def figure(rec: dict, shown: list[str], against: str = "full"):
    """Return the race's figure: left, every seed's held-out loss per recipe, `against`'s range
    shaded; right, the median training loss per 10 steps of `against` and of the recipes
    `shown`."""
    import matplotlib.pyplot as plt

    names = list(rec["config"]["recipes"])
    fig, (left, right) = plt.subplots(1, 2, figsize=(7, 3.6), width_ratios=(1, 1.15))
    band = finals(rec, against)
    left.axvspan(min(band), max(band), color="0.85", lw=0)
    for row, name in enumerate(names):
        ends = [v for v in finals(rec, name) if not math.isnan(v)]
        left.plot(ends, [row] * len(ends), "o", color=f"C{row % 7}", ms=4.5, alpha=0.8)
    left.set_yticks(range(len(names)), names)
    left.invert_yaxis()
    left.set_xlabel("held-out loss after the last step")
    left.grid(axis="y", visible=False)
    every = rec["config"]["every"]
    for name in [against, *shown]:
        loss = curves(rec, name)
        steps = [every * (k + 1) for k in range(len(loss))]
        right.plot(steps, loss, color=f"C{names.index(name) % 7}", label=name)
    right.set_xlabel("optimizer step")
    right.set_ylabel(f"training loss (mean of {every} steps)")
    right.legend(fontsize="small")
    fig.tight_layout()
    return fig
