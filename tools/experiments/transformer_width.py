"""Width under the standard parametrisation and under μP: where the best learning rate sits.

docs/transformer.md draws it. Every run is `train` of snippets/transformer.py (the loop the
chapter shows), the baseline of tools/experiments/transformer_lr.py at widths 32, 64 and 128
(heads of 16 dimensions: 2, 4 and 8 heads). Standard: every matrix drawn at 0.02 and trained
at the one learning rate. μP (`mup=True`, base width 64): the blocks' matrices drawn with
variance and trained with learning rate times 64 / width, their weight decay times width / 64,
the logits times 64 / width. At width 64 the two are the same model, so those runs serve both.
"""

from __future__ import annotations

from tools.experiments import snippet
from tools.experiments.transformer_lr import REPLAYED, SEEDS, summarise

WIDTHS = [32, 64, 128]
BASE_WIDTH = 64
LRS = [1e-3, 2e-3, 4e-3, 8e-3, 1.6e-2, 3.2e-2]


def _train():
    return snippet("snippets/transformer.py", "imports", "lm_loss", "groups", "train")["train"]


def run() -> dict:
    train = _train()
    runs, replay = [], None
    for width in WIDTHS:
        for mup in (False, True) if width != BASE_WIDTH else (False,):
            for lr in LRS:
                for seed in SEEDS:
                    log = train(lr, seed, width=width, mup=mup)
                    if replay is None:
                        replay = log["loss"][:REPLAYED].tolist()
                    runs.append(
                        {"width": width, "mup": mup, "lr": lr, "seed": seed} | summarise(log)
                    )
    config = {"widths": WIDTHS, "base_width": BASE_WIDTH, "lrs": LRS, "seeds": SEEDS, "steps": 300}
    return {"config": config, "runs": runs, "replay": replay}


def replay(record: dict, steps: int) -> list[float]:
    """Rerun the first `steps` (at most 10, the warmup) steps of the record's first run."""
    first = record["runs"][0]
    if steps > 10:
        raise ValueError(f"replay: at most the warmup's 10 steps can be replayed, got {steps}.")
    log = _train()(first["lr"], first["seed"], steps=steps, width=first["width"], mup=first["mup"])
    return log["loss"].tolist()
