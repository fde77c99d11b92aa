"""Learning-rate sensitivity of chapter 8's GPT: the baseline and one remedy at a time.

docs/transformer.md draws it. Every run is `train` of snippets/transformer.py (the loop the
chapter shows): a pre-LN GPT of width 64, 2 blocks, 4 heads, 300 AdamW steps on 16 x 64 bytes,
final loss on the held-out tenth of the text. Each setting changes one thing from the baseline.
"""

from __future__ import annotations

import math

from tools.experiments import snippet

LRS = [1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0]
SEEDS = [0, 1, 2]
SETTINGS = {
    "baseline": {},
    "qk_norm": {"qk_norm": True},
    "z_loss": {"z_loss": 1e-4},
    "warmup": {"warmup": 100},
    "no_depth_init": {"depth_init": False},
    "post_ln": {"norm": "post"},
}
EVERY = 10  # the record keeps each run's curves as means (loss) and maxima (logits) of 10 steps
REPLAYED = 5


def _train():
    return snippet("snippets/transformer.py", "imports", "lm_loss", "groups", "train")["train"]


def _number(x: float, digits: int = 5) -> float | None:
    return None if not math.isfinite(x) else float(f"{x:.{digits}g}")


def summarise(log: dict) -> dict:
    """Return what the record keeps of one run's log (None where a value is not finite)."""
    loss, logit = log["loss"], log["max_logit"]
    return {
        "val": _number(log["val"]),
        "initial": _number(loss[0].item()),
        "loss": [_number(x) for x in loss.view(-1, EVERY).mean(1).tolist()],
        "max_logit": [_number(x) for x in logit.view(-1, EVERY).amax(1).tolist()],
        "log_z": _number(log["log_z"][-EVERY:].mean().item()),
    }


def run() -> dict:
    train = _train()
    runs, replay = [], None
    for setting, switches in SETTINGS.items():
        for lr in LRS:
            for seed in SEEDS:
                log = train(lr, seed, **switches)
                if replay is None:
                    replay = log["loss"][:REPLAYED].tolist()
                runs.append({"setting": setting, "lr": lr, "seed": seed, **summarise(log)})
    config = {"lrs": LRS, "seeds": SEEDS, "settings": SETTINGS, "steps": 300, "every": EVERY}
    return {"config": config, "runs": runs, "replay": replay}


def replay(record: dict, steps: int) -> list[float]:
    """Rerun the first `steps` steps of the record's first run; return their losses.

    The first `warmup` steps do not depend on the run's length (the cosine starts after them),
    so a run of `steps` steps repeats them.
    """
    first = record["runs"][0]
    switches = record["config"]["settings"][first["setting"]]
    if steps > switches.get("warmup", 10):
        raise ValueError(f"replay: at most the warmup's steps can be replayed, got {steps}.")
    log = _train()(first["lr"], first["seed"], steps=steps, **switches)
    return log["loss"].tolist()
