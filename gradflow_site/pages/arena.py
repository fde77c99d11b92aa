"""Build side of docs/arena.md: the race's figure, table, words and widget data.

The runs come from snippets/arena.py (what the reader copies), which trains every recipe with
snippets/train.py: `{condition: {recipe: [one log per seed]}}`, a log being train()'s list of
per-step dicts (`loss`, `skipped`, ... and `val_loss` on the last step). This module reads such
runs: the range of the final held-out loss over the seeds, which recipes' ranges lie apart from
another's, the strip figure of every seed's result, the failure table and the widget's payload.
"""

from __future__ import annotations

import math

__all__ = [
    "apart",
    "changes",
    "figure",
    "final",
    "listing",
    "nan_count",
    "relation",
    "spread",
    "table",
    "widget",
    "widget_data",
]


def final(log: list[dict]) -> float:
    """Return the held-out loss a run's log ends with (nan where it was inf or NaN)."""
    if not log or "val_loss" not in log[-1]:
        raise ValueError("final: the log's last step has no `val_loss`; pass train()['log'].")
    value = log[-1]["val_loss"]
    return value if math.isfinite(value) else math.nan


def nan_count(logs: list[list[dict]]) -> int:
    """Return how many of `logs` (one per seed) ended with an inf or NaN held-out loss."""
    return sum(math.isnan(final(log)) for log in logs)


def spread(logs: list[list[dict]], fmt: str = ".3g") -> str:
    """Return the range of the finite final losses of `logs` and how many seeds hit NaN.

    Example: "3.44–3.48", "18–38", "NaN ×3" or "3.44–3.48, NaN ×1".
    """
    if not logs:
        raise ValueError("spread: `logs` is empty; pass one log per seed.")
    ends = sorted(v for v in map(final, logs) if not math.isnan(v))
    parts = []
    if ends:
        low, high = f"{ends[0]:{fmt}}", f"{ends[-1]:{fmt}}"
        parts.append(low if low == high else f"{low}–{high}")
    if n := nan_count(logs):
        parts.append(f"NaN ×{n}")
    return ", ".join(parts)


def relation(a: list[list[dict]], b: list[list[dict]]) -> str:
    """Return how the final losses of runs `a` lie against those of `b`, over their seeds.

    "below" when every seed of `a` ended lower than every seed of `b`, "above" for the
    reverse, "overlapping" otherwise: then the seed alone could make the difference. A run
    that ended inf or NaN counts as +inf.
    """

    def ends(logs):
        if not logs:
            raise ValueError("relation: pass one log per seed for `a` and `b`, got an empty list.")
        return [math.inf if math.isnan(v) else v for v in map(final, logs)]

    a, b = ends(a), ends(b)
    if max(a) < min(b):
        return "below"
    if min(a) > max(b):
        return "above"
    return "overlapping"


def listing(names) -> str:
    """Return `names` as "a, b and c", or "no recipe" when there are none (a recipe is called
    "none")."""
    names = list(names)
    if len(names) < 2:
        return names[0] if names else "no recipe"
    return ", ".join(names[:-1]) + " and " + names[-1]


def apart(panel: dict, against: str = "none", side: str | None = None) -> str:
    """Return the recipes of `panel` whose range lies apart from `against`'s, as `listing`.

    `side` keeps only those "below" or "above" it; by default both.
    """
    if against not in panel:
        raise ValueError(f"apart: `against` must be one of {list(panel)}, got {against!r}.")
    if side not in (None, "below", "above"):
        raise ValueError(f"apart: `side` must be None, 'below' or 'above', got {side!r}.")
    sides = (side,) if side else ("below", "above")
    return listing(
        name
        for name, logs in panel.items()
        if name != against and relation(logs, panel[against]) in sides
    )


def changes(recipe: dict) -> str:
    """Return a recipe's Config changes as `field=value` text ("—" for none)."""
    return ", ".join(f"{k}={v!r}" for k, v in recipe.items()) or "—"


def table(runs: dict, recipes: dict, against: str = "none") -> str:
    """Return the race as a Markdown table: per recipe, its changes and, per condition, the
    range of the final held-out loss over the seeds and how it lies against `against`'s."""
    from gradflow_site.render import table as markdown_table

    words = {"below": "lower", "above": "higher", "overlapping": "within the spread"}
    headers = ["recipe", "Config changes"]
    for condition in runs:
        headers += [condition, f"vs {against}"]
    rows = []
    for name, recipe in recipes.items():
        row = [name, changes(recipe)]
        for panel in runs.values():
            if name not in panel:
                row += ["no run", "–"]
                continue
            side = "–" if name == against else words[relation(panel[name], panel[against])]
            if name != against and nan_count(panel[name]) == len(panel[name]):
                side = "diverged"  # a NaN is no loss to compare
            row += [spread(panel[name], ".4g"), side]
        rows.append(row)
    return markdown_table(headers, rows, "ll" + "rl" * len(runs))


def figure(runs: dict, against: str = "none"):
    """Return a strip figure: per condition, every seed's final held-out loss per recipe.

    `against`'s range is shaded across each panel, so a recipe whose dots leave the band
    differs by more than the seeds spread it; a seed that ended inf or NaN is an × at the
    panel's right edge.
    """
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 3.6), sharey=True)
    axes = [axes] if len(runs) == 1 else list(axes)
    for ax, (condition, panel) in zip(axes, runs.items()):
        names = list(panel)
        finite = [v for logs in panel.values() for v in map(final, logs) if not math.isnan(v)]
        low, high = min(finite), max(finite)
        pad = (high - low) * 0.08 or 0.01
        edge = high + 2 * pad
        band = [final(log) for log in panel[against]]
        if not any(map(math.isnan, band)):
            ax.axvspan(min(band), max(band), color="0.85", lw=0)
        for row, name in enumerate(names):
            ends = list(map(final, panel[name]))
            xs = [v for v in ends if not math.isnan(v)]
            ax.plot(xs, [row] * len(xs), "o", color=f"C{row % 10}", ms=5, alpha=0.85)
            if n := sum(map(math.isnan, ends)):
                ax.plot([edge], [row], "X", color=f"C{row % 10}", ms=8)
                ax.annotate(f"NaN ×{n}", (edge, row), xytext=(6, -3), textcoords="offset points")
        ax.set_xlim(low - pad, edge + 4 * pad)
        ax.set_title(condition)
        ax.set_xlabel("held-out loss after the last step")
        ax.set_yticks(range(len(names)), names)
        ax.grid(axis="x", alpha=0.3)
    axes[0].invert_yaxis()
    return fig


def _summary(log: list[dict]) -> dict:
    from gradflow_site.widgets import rounded

    return {
        "loss": [v if math.isfinite(v) else None for v in rounded([s["loss"] for s in log])],
        "val": None if math.isnan(final(log)) else rounded(final(log)),
        "skipped": sum(s["skipped"] for s in log),
    }


def widget_data(panels: list, seeds: list, recipes: dict) -> dict:
    """Return the arena widget's payload from `panels`: [(Config, {recipe: [logs]}), ...].

    The controls pick a learning rate (`Config.lr`), a batch (`Config.micro_batch`, sequences
    per optimizer step) and a seed. A panel run with fewer seeds than `seeds` holds None for the
    seeds it lacks, so the widget says there is no run there instead of drawing another seed's.
    """
    if not panels:
        raise ValueError("widget_data: `panels` is empty; pass (Config, runs) pairs.")
    lrs = sorted({cfg.lr for cfg, _ in panels})
    batches = sorted({cfg.micro_batch for cfg, _ in panels})
    by_cell = {(cfg.lr, cfg.micro_batch): panel for cfg, panel in panels}
    missing = [(lr, b) for lr in lrs for b in batches if (lr, b) not in by_cell]
    if missing:
        raise ValueError(f"widget_data: no runs for (lr, batch) {missing}; race every pair.")
    names = list(recipes)

    def cell(panel):
        return [
            [_summary(panel[name][i]) for name in names] if i < len(panel[names[0]]) else None
            for i in range(len(seeds))
        ]

    first = panels[0][0]
    return {
        "lr": lrs,
        "batch": batches,
        "seeds": list(seeds),
        "steps": first.steps,
        "recipes": names,
        "precision": [recipes[n].get("precision", first.precision) for n in names],
        "runs": [[cell(by_cell[(lr, b)]) for b in batches] for lr in lrs],
    }


def widget(data: dict, start: dict) -> str:
    """Return the arena widget (docs/assets/widgets/arena.js) with a static figure of `start`.

    `start` = {"lr", "batch", "seed"} picks the cell the widget opens on and the figure draws.
    """
    import matplotlib.pyplot as plt

    from gradflow_site.render import plain_log_ticks, svg
    from gradflow_site.widgets import widget as make_widget

    i, j = data["lr"].index(start["lr"]), data["batch"].index(start["batch"])
    cell = data["runs"][i][j][data["seeds"].index(start["seed"])]
    if cell is None:
        raise ValueError(f"widget: `start` {start} has no run; pick a cell that was run.")
    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    steps = range(1, data["steps"] + 1)
    for k, (name, run) in enumerate(zip(data["recipes"], cell)):
        loss = [math.nan if v is None else v for v in run["loss"]]
        ax.plot(steps, loss, "o-" if k < 6 else "s--", color=f"C{k}", label=name, ms=3.5)
    ax.set_yscale("log")
    plain_log_ticks(ax)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("training loss")
    ax.legend(ncols=3, fontsize="small")
    ax.set_title(f"Learning rate {start['lr']:g}, batch {start['batch']}, seed {start['seed']}")
    return make_widget("arena", {**data, "start": start}, static=svg(fig))
