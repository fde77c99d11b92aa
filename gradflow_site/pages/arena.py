"""Build side of docs/arena.md: the arena widget's races and words for the chapter's prose.

The runs themselves come from snippets/arena.py (what the reader copies); this module turns them
into words and computes the widget's grid of short races with gradflow_ref.arena.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gradflow_ref.arena import RECIPES, ArenaConfig, Run, race

__all__ = ["GRID", "START", "Grid", "ends", "grid", "names", "same_digits", "widget"]

GRID = {"depth": [3, 12], "lr": [0.1, 0.3, 1.0], "batch_size": [1, 16]}  # the widget's sliders
START = {"depth": 12, "lr": 0.3, "batch_size": 16}  # the cell the widget opens on
STYLES = dict(zip(RECIPES, ["o-", "s--", "^-.", "v:", "x-", "D-"]))  # as snippets/arena.py


def names(runs: dict[str, Run], *statuses: str) -> str:
    """Return the recipes of `runs` whose status is one of `statuses`, as "a, b and c"."""
    if not statuses:
        raise ValueError("names: give at least one status, e.g. names(runs, 'NaN/inf').")
    hits = [name for name, run in runs.items() if run.status in statuses]
    if len(hits) < 2:
        return hits[0] if hits else "none"
    return ", ".join(hits[:-1]) + " and " + hits[-1]


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
    """The widget's short races: every slider position, in BF16 and in FP16."""

    config: ArenaConfig  # the base of every cell (steps, eval_every, device)
    axes: dict[str, list]  # slider values, as GRID
    cells: list  # [depth][lr][batch_size][fp16] -> one summary per recipe, in RECIPES order

    def at(self, depth, lr, batch_size, fp16: bool = False) -> dict[str, dict]:
        """Return {recipe: summary} of one cell."""
        i, j, k = (self.axes[key].index(v) for key, v in zip(self.axes, (depth, lr, batch_size)))
        return dict(zip(RECIPES, self.cells[i][j][k][int(fp16)]))

    def every(self) -> list[dict[str, dict]]:
        return [
            self.at(d, lr, b, fp16)
            for d in self.axes["depth"]
            for lr in self.axes["lr"]
            for b in self.axes["batch_size"]
            for fp16 in (False, True)
        ]

    def learned(self, recipe: str) -> int:
        """Return in how many cells `recipe` learned."""
        return sum(cell[recipe]["status"] == "learns" for cell in self.every())

    def ckpt_same(self) -> int:
        """Return in how many cells the checkpointing recipe equals the baseline exactly."""
        return sum(cell["ckpt"] == cell["baseline"] for cell in self.every())

    def pairs(self) -> list[tuple[dict, dict]]:
        """Return (BF16 cell, FP16 cell) for every slider position."""
        return [
            (self.at(d, lr, b), self.at(d, lr, b, True))
            for d in self.axes["depth"]
            for lr in self.axes["lr"]
            for b in self.axes["batch_size"]
        ]

    def fp16_dead(self) -> list[tuple[dict, dict]]:
        """Return the positions where the mixed recipe hit inf/NaN in FP16."""
        return [(bf, hf) for bf, hf in self.pairs() if hf["mixed"]["status"] == "NaN/inf"]

    def skips(self) -> list[int]:
        """Return the full recipe's skipped steps in each FP16 cell."""
        return [hf["full"]["skipped"] for _, hf in self.pairs()]

    def dead_elsewhere(self) -> int:
        """Return how many runs of recipes other than mixed hit inf/NaN."""
        return sum(
            r["status"] == "NaN/inf"
            for cell in self.every()
            for name, r in cell.items()
            if name != "mixed"
        )


def grid(base: ArenaConfig, axes: dict[str, list] | None = None, steps: int = 8) -> Grid:
    """Race every recipe at every slider position for `steps` steps, scored after each.

    FP16 mode changes only the recipes that work in low precision; the others are the same runs.
    """
    axes = axes or GRID
    if set(axes) != set(GRID):
        raise ValueError(f"grid: `axes` must have the keys {list(GRID)}, got {list(axes)}.")
    short = replace(base, steps=steps, eval_every=1)
    low = [name for name, recipe in RECIPES.items() if recipe.mixed]

    def cell(depth, lr, batch_size):
        cfg = replace(short, depth=depth, lr=lr, batch_size=batch_size)
        bf16 = race(cfg)
        fp16 = {**bf16, **race(replace(cfg, fp16=True), low)}
        return [[_summary(run) for run in runs.values()] for runs in (bf16, fp16)]

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
        ax.plot(loss, STYLES[name], color=f"C{i}", markersize=3.5, label=name)
    ax.set_yscale("log")
    ax.set_ylim(0.1, 100)
    plain_log_ticks(ax)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("held-out loss")
    ax.legend(ncols=3, fontsize="small")
    ax.set_title(
        f"Depth {start['depth']}, learning rate {start['lr']}, batch {start['batch_size']}"
    )
    data = {
        **g.axes,
        "steps": g.config.steps,
        "recipes": list(RECIPES),
        "start": start,
        "runs": g.cells,
    }
    return make_widget("arena", data, static=svg(fig))
