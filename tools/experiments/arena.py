"""The arena's race (docs/arena.md): every recipe of snippets/arena.py, every seed, 300 steps.

Each run is the snippet's own `run` (its `race` calls it per recipe and seed), which trains with
snippets/train.py at chapter 8's scale: 2 blocks, 64 wide, 16 x 64 bytes per step, peak learning
rate 0.01. The record keeps, per run, the held-out loss after the last step, the training loss
and the largest gradient norm per 10 steps, the clipped and skipped steps, and whether its log
equals the full recipe's of the same seed at every step.
"""

from __future__ import annotations

import dataclasses
import math
import sys

from tools.experiments import ROOT, snippet

EVERY = 10  # curves are kept per 10 steps: the mean training loss, the largest gradient norm
REPLAYED = 5


def _race() -> dict:
    if str(ROOT / "snippets") not in sys.path:  # the snippet imports train.py as its reader does
        sys.path.insert(0, str(ROOT / "snippets"))
    return snippet("snippets/arena.py", "setup", "recipes", "race")


def _number(x: float, digits: int = 5) -> float | None:
    return float(f"{x:.{digits}g}") if math.isfinite(x) else None


def _steps(log: list[dict]) -> list[tuple]:
    return [(s["loss"], s["grad_norm"], s["skipped"]) for s in log] + [log[-1]["val_loss"]]


def summarise(log: list[dict], full: list[dict]) -> dict:
    """Return what the record keeps of one run's log; `full`: the full recipe's, same seed."""
    chunks = [log[i : i + EVERY] for i in range(0, len(log), EVERY)]
    return {
        "val": _number(log[-1]["val_loss"]),
        "initial": _number(log[0]["loss"]),
        "loss": [_number(math.fsum(s["loss"] for s in c) / len(c)) for c in chunks],
        "grad_norm": [_number(max(s["grad_norm"] for s in c)) for c in chunks],
        "clipped": sum(s["clipped"] for s in log),
        "skipped": sum(s["skipped"] for s in log),
        "loss_scale": _number(log[-1]["loss_scale"]),
        "same_as_full": _steps(log) == _steps(full),
    }


def run() -> dict:
    ns = _race()
    base, seeds, recipes = ns["base"], ns["seeds"], ns["RECIPES"]
    logs = ns["race"]()
    runs = [
        {"recipe": name, "seed": seed, **summarise(log, logs["full"][i])}
        for name in recipes
        for i, (seed, log) in enumerate(zip(seeds, logs[name]))
    ]
    config = {
        "base": dataclasses.asdict(base),
        "recipes": recipes,
        "seeds": list(seeds),
        "every": EVERY,
    }
    replay = [s["loss"] for s in logs["full"][0][:REPLAYED]]
    return {"config": config, "runs": runs, "replay": replay}


def replay(record: dict, steps: int) -> list[float]:
    """Rerun the first `steps` steps of the record's first run; return their training losses.

    Within the warmup the learning rate does not depend on the run's length, so a run of
    `steps` steps repeats them.
    """
    first = record["runs"][0]
    ns = _race()
    base = ns["replace"](ns["base"], steps=steps)
    if steps > base.warmup:
        raise ValueError(f"replay: at most the warmup's {base.warmup} steps, got {steps}.")
    return [s["loss"] for s in ns["run"](base, first["recipe"], first["seed"])]
