"""Chapter 10's gallery: five failures of a small GPT and their remedies, five seeds each.

docs/diagnosis.md renders it (gradflow_site/pages/diagnosis.py). Every run is `train` of
snippets/diagnosis.py, the loop the chapter shows: a pre-LN GPT of width 64, 2 blocks, 4 heads,
300 AdamW steps on 16 x 64 bytes of Shakespeare, final loss on the held-out tenth of the text.
A row is a failure and its remedy, each one call of `train` with the keyword arguments below;
the healthy run is `train(seed)`. A seed sets the initial weights and the order of the batches.
"""

from __future__ import annotations

import math

from tools.experiments import snippet

SEEDS = [0, 1, 2, 3, 4]
EVERY = 10  # the record keeps each run's curves per 10 steps: mean loss, largest norm and logit
HEALTHY = {}
# failure -> (train's arguments that cause it, those of its remedy)
ROWS = {
    "corrupt shard": (
        {"corrupt": list(range(200, 230))},
        {"corrupt": list(range(200, 230)), "guard": "skip"},
    ),
    "learning rate too high": ({"lr": 1.0}, {"lr": 1.0, "guard": "rollback"}),
    "missing warmup": ({"lr": 0.01, "warmup": 0}, {"lr": 0.01}),
    "missing divisor": ({"accum": 4, "divide": False}, {"accum": 4}),
    "attention-logit growth": ({"lr": 0.3}, {"lr": 0.3, "qk_norm": True}),
}
REPLAYED = 5  # steps of the first run the record keeps for tests/test_frozen.py


def _train():
    return snippet("snippets/diagnosis.py", "imports", "skip", "rollback", "train")["train"]


def _number(x: float) -> float | None:
    return float(f"{x:.5g}") if math.isfinite(x) else None


def summarise(log: dict) -> dict:
    """Return what the record keeps of one run's log (None where a value is not finite)."""
    windows = lambda x: x.view(-1, EVERY)  # noqa: E731
    return {
        "val": _number(log["val"]),
        "loss": [_number(x) for x in windows(log["loss"]).mean(1).tolist()],
        "norm": [_number(x) for x in windows(log["norm"]).amax(1).tolist()],
        "logit": [_number(x) for x in windows(log["logit"]).amax(1).tolist()],
        "skipped": [int(x) for x in windows(log["skipped"]).sum(1).tolist()],
    }


def settings() -> dict[str, dict]:
    """Return every setting by name: 'healthy', then '<failure>' and '<failure>: remedy'."""
    out = {"healthy": HEALTHY}
    for name, (fail, fix) in ROWS.items():
        out[name], out[f"{name}: remedy"] = fail, fix
    return out


def run() -> dict:
    train = _train()
    runs, replay = [], None
    for setting, kwargs in settings().items():
        for seed in SEEDS:
            log = train(seed, **kwargs)
            if replay is None:
                replay = log["loss"][:REPLAYED].tolist()
            runs.append({"setting": setting, "seed": seed, **summarise(log)})
    config = {"seeds": SEEDS, "steps": 300, "every": EVERY, "healthy": HEALTHY, "rows": ROWS}
    return {"config": config, "runs": runs, "replay": replay}


def replay(record: dict, steps: int) -> list[float]:
    """Rerun the first `steps` steps of the record's first run (the healthy run, seed 0).

    Warmup's steps do not depend on the run's length (the cosine starts after them), so a run of
    `steps` steps repeats them.
    """
    first = record["runs"][0]
    if first["setting"] != "healthy" or steps > 10:
        raise ValueError(f"replay: at most the 10 warmup steps of the healthy run, got {steps}.")
    return _train()(first["seed"], steps=steps)["loss"].tolist()
