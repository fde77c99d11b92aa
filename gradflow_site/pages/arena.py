"""Build side of docs/arena.md: words for the chapter's prose and the arena widget's races.

The runs themselves come from snippets/arena.py (what the reader copies): there every condition
is raced with several seeds, `{recipe: [one Run per seed]}`. This module turns such runs into
words (which recipes, what range, which difference exceeds the seeds' spread) and computes the
widget's grid of short one-seed races with gradflow_ref.arena.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gradflow_ref.arena import RECIPES, ArenaConfig, Run, race

__all__ = [
    "GRID",
    "LOW_PRECISION",
    "START",
    "Grid",
    "below",
    "count",
    "ends",
    "grid",
    "names",
    "relation",
    "same_digits",
    "spread",
    "widget",
]

GRID = {"depth": [12], "lr": [0.1, 0.3, 1.0], "batch_size": [1, 16]}  # the widget's sliders
START = {"depth": 12, "lr": 0.3, "batch_size": 16}  # the cell the widget opens on
LOW_PRECISION = [name for name, recipe in RECIPES.items() if recipe.mixed]  # have an FP16 run
STYLES = dict(zip(RECIPES, ["o-", "s-", "^-", "v-", "x--", "D-"]))  # as snippets/arena.py


def _seed_runs(runs, func: str) -> list[Run]:
    if isinstance(runs, Run):
        return [runs]
    runs = list(runs)
    if not runs or not all(isinstance(r, Run) for r in runs):
        raise TypeError(
            f"{func}: pass a Run or a non-empty list of Runs (one per seed), got {runs!r}."
        )
    return runs


def _listing(hits) -> str:
    hits = list(hits)
    if len(hits) < 2:
        return hits[0] if hits else "none"
    return ", ".join(hits[:-1]) + " and " + hits[-1]


def names(panel: dict, *statuses: str) -> str:
    """Return the recipes of `panel` all of whose runs have one of `statuses`, as "a, b and c".

    `panel` maps a recipe to its runs, one per seed (`{"clip": [run, run, run], ...}`) or to a
    single Run. Returns "none" when no recipe qualifies.
    """
    if not statuses:
        raise ValueError("names: give at least one status, e.g. names(panel, 'NaN/inf').")
    return _listing(
        name
        for name, runs in panel.items()
        if all(r.status in statuses for r in _seed_runs(runs, "names"))
    )


def count(runs, status: str) -> int:
    """Return how many of `runs` (one per seed) have `status`."""
    return sum(r.status == status for r in _seed_runs(runs, "count"))


def spread(values, fmt: str = ".3g") -> str:
    """Return the range of `values` as "lowest–highest" (one value when they are all equal).

    Example: spread([0.379, 0.221, 0.234]) == "0.221–0.379".
    """
    values = list(values)
    if not values:
        raise ValueError("spread: `values` is empty; pass at least one number.")
    low, high = f"{min(values):{fmt}}", f"{max(values):{fmt}}"
    return low if low == high else f"{low}–{high}"


def relation(a, b) -> str:
    """Return how the final losses of runs `a` lie against those of `b`, over their seeds.

    "entirely below" when every run of `a` ended lower than every run of `b`, "entirely
    above" for the reverse, and "overlapping" when the two ranges overlap, so the difference
    is within the seeds' spread. A run that hit inf/NaN counts as ending at +inf.
    """

    def ends(runs, func):
        return [
            r.final_loss if r.status != "NaN/inf" and math.isfinite(r.final_loss) else math.inf
            for r in _seed_runs(runs, func)
        ]

    a, b = ends(a, "relation"), ends(b, "relation")
    if max(a) < min(b):
        return "entirely below"
    if min(a) > max(b):
        return "entirely above"
    return "overlapping"


def below(panel: dict, recipe: str) -> str:
    """Return the recipes of `panel` whose final losses all lie below every one of `recipe`'s.

    Those are the differences from `recipe` that exceed the seeds' spread (`relation`), as
    "a, b and c", or "none".
    """
    if recipe not in panel:
        raise ValueError(f"below: `recipe` must be one of {list(panel)}, got {recipe!r}.")
    return _listing(
        n for n, runs in panel.items() if relation(runs, panel[recipe]) == "entirely below"
    )


def same_digits(a: float, b: float) -> int:
    """Return how many leading significant digits `a` and `b` share when both are rounded.

    Example: same_digits(3.390e38, 3.403e38) == 2 (both are 3.4e38; 3.39e38 != 3.40e38).
    """
    if not (math.isfinite(a) and math.isfinite(b)):
        raise ValueError(f"same_digits: `a` and `b` must be finite, got {a!r} and {b!r}.")
    digits = 0
    while digits < 17 and f"{a:.{digits}e}" == f"{b:.{digits}e}":
        digits += 1
    return digits


def _summary(run: Run) -> dict:
    from gradflow_site.widgets import rounded

    return {
        "loss": [v if math.isfinite(v) else None for v in rounded(run.eval_loss)],
        "status": run.status,
        "dead": None if run.dead_at is None else run.dead_at + 1,
        "skipped": sum(run.skipped),
    }


@dataclass
class Grid:
    """The widget's short races: every slider position, in BF16 and in FP16, one seed.

    FP16 mode changes only the recipes in LOW_PRECISION; the others train in FP32 and have no
    FP16 run (None in `cells`).
    """

    config: ArenaConfig  # the base of every cell (steps, eval_every, seed, device)
    axes: dict[str, list]  # slider values, as GRID
    cells: list  # [depth][lr][batch_size][fp16] -> one summary (or None) per recipe, as RECIPES

    def at(self, depth, lr, batch_size, fp16: bool = False) -> dict[str, dict]:
        """Return {recipe: summary} of the runs made at one slider position in one format."""
        i, j, k = (self.axes[key].index(v) for key, v in zip(self.axes, (depth, lr, batch_size)))
        summaries = zip(RECIPES, self.cells[i][j][k][int(fp16)])
        return {name: run for name, run in summaries if run is not None}

    def positions(self) -> list[tuple]:
        """Return every (depth, lr, batch_size) the sliders can pick."""
        return [
            (d, lr, b)
            for d in self.axes["depth"]
            for lr in self.axes["lr"]
            for b in self.axes["batch_size"]
        ]

    def pairs(self) -> list[tuple[dict, dict]]:
        """Return (BF16 cell, FP16 cell) for every slider position."""
        return [(self.at(*p), self.at(*p, fp16=True)) for p in self.positions()]

    def ckpt_same(self) -> int:
        """Return at how many positions the checkpointing run equals the baseline's exactly."""
        return sum(bf["ckpt"] == bf["baseline"] for bf, _ in self.pairs())

    def fp16_dead(self) -> list[tuple[dict, dict]]:
        """Return the positions where the mixed recipe hit inf/NaN in FP16."""
        return [(bf, hf) for bf, hf in self.pairs() if hf["mixed"]["status"] == "NaN/inf"]

    def skips(self) -> list[int]:
        """Return the full recipe's skipped steps in each FP16 cell."""
        return [hf["full"]["skipped"] for _, hf in self.pairs()]


def grid(base: ArenaConfig, axes: dict[str, list] | None = None, steps: int = 8) -> Grid:
    """Race every recipe at every slider position for `steps` steps, scored after each.

    In FP16 mode only the recipes of LOW_PRECISION are trained again; the others have no
    FP16 run.
    """
    axes = axes or GRID
    if set(axes) != set(GRID):
        raise ValueError(f"grid: `axes` must have the keys {list(GRID)}, got {list(axes)}.")
    short = replace(base, steps=steps, eval_every=1)

    def cell(depth, lr, batch_size):
        cfg = replace(short, depth=depth, lr=lr, batch_size=batch_size)
        bf16 = race(cfg)
        fp16 = race(replace(cfg, fp16=True), LOW_PRECISION)
        return [
            [_summary(run) for run in bf16.values()],
            [_summary(fp16[name]) if name in fp16 else None for name in RECIPES],
        ]

    cells = [
        [[cell(d, lr, b) for b in axes["batch_size"]] for lr in axes["lr"]] for d in axes["depth"]
    ]
    return Grid(short, {key: list(axes[key]) for key in GRID}, cells)


def ends(g: Grid, start: dict | None = None) -> str:
    """Return how each recipe's curve ends in the cell `start`, for the widget's caption."""

    def end(run):
        if run["status"] == "NaN/inf":
            return "inf/NaN" if run["dead"] is None else f"inf/NaN after step {run['dead']}"
        return "inf" if run["loss"][-1] is None else f"{run['loss'][-1]:.3g}"

    shown = g.at(**(start or START))
    return "; ".join(f"{name} ends at {end(run)}" for name, run in shown.items())


def widget(g: Grid, start: dict | None = None) -> str:
    """Return the arena widget (docs/assets/widgets/arena.js) with a static figure of `start`."""
    import matplotlib.pyplot as plt

    from gradflow_site.render import plain_log_ticks, svg
    from gradflow_site.widgets import widget as make_widget

    start = start or START
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    for i, (name, run) in enumerate(g.at(**start).items()):
        loss = [math.inf if v is None else v for v in run["loss"]]
        look = {"markersize": 7, "mew": 1.2, "lw": 1, "zorder": 3} if name == "ckpt" else {}
        if name == "baseline":
            look = {"lw": 3}
        look = {"markersize": 3.5, **look}
        ax.plot(loss, STYLES[name], color=f"C{i}", label=name, **look)
    ax.set_yscale("log")
    ax.set_ylim(0.1, 100)
    plain_log_ticks(ax)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("held-out loss")
    ax.legend(ncols=3, fontsize="small")
    ax.set_title(
        f"Depth {start['depth']}, learning rate {start['lr']}, batch {start['batch_size']}, "
        f"seed {g.config.seed}"
    )
    data = {
        **g.axes,
        "steps": g.config.steps,
        "recipes": list(RECIPES),
        "low_precision": LOW_PRECISION,
        "start": start,
        "runs": g.cells,
    }
    return make_widget("arena", data, static=svg(fig))
