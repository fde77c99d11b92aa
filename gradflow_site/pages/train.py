"""Build side of docs/train.md: snippets/train.py on one process and on two, side by side.

Every run is a rank of `ranks` (gradflow_ref._ranks, which starts processes as torchrun would:
RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT in the environment), a world of one included, so
the build itself never starts a process group: torch keeps gloo's threads alive after one, and
a rank forked from such a process hangs (gradflow_ref._ranks then starts fresh processes, at
seconds each). `one_and_two` trains a configuration on one process and on two that split each
step's sequences; `trajectory_table` and `held_table` turn the runs into Markdown.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path

import torch

from gradflow_ref._ranks import run_ranks
from gradflow_ref.memory import GPT, MemoryConfig
from gradflow_ref.sharding import predict_fsdp2
from gradflow_site.render import table

__all__ = [
    "script",
    "text_bytes",
    "initial_losses",
    "rank_main",
    "one_and_two",
    "largest_gap",
    "trajectory_table",
    "held_table",
    "predicted",
    "stop_and_resume",
]

SCRIPT = Path(__file__).resolve().parents[2] / "snippets" / "train.py"


def script():
    """Return snippets/train.py as the module `train` (imported once, as a reader imports it)."""
    if "train" not in sys.modules:
        spec = importlib.util.spec_from_file_location("train", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules["train"] = module
        spec.loader.exec_module(module)
    return sys.modules["train"]


def text_bytes() -> int:
    """Return the length of the text train.py trains on, in bytes (= tokens)."""
    train_part, held_out = script().load_text()
    return len(train_part) + len(held_out)


def initial_losses(cfg) -> tuple[float, float]:
    """Return the loss of step 0 with GPT's own initialisation and with train.py's (GPT-2's)."""
    train = script()
    shape = MemoryConfig(cfg.n_layers, cfg.hidden, cfg.n_heads, cfg.seq_len, 1, 256)
    torch.manual_seed(cfg.seed)
    x, y = train.batch(train.load_text()[0], cfg, 0, 0, 0, 1, "cpu")
    with torch.no_grad():
        default = GPT(shape, dropout=0.0)(x, y).item()
    fields = dict(steps=1, precision="fp32", print_every=0, accum_steps=1)
    gpt2 = ranks(dataclasses.replace(cfg, **fields), 1)[0]["log"][0]["loss"]
    return default, gpt2


def ranks(cfg, world: int) -> list[dict]:
    """Train `cfg` on `world` processes; return each rank's train.train result."""
    fields = dataclasses.asdict(cfg)
    return run_ranks("gradflow_site.pages.train:rank_main", world, fields, 300.0, "train page")


def rank_main(rank: int, world_size: int, fields: dict) -> dict:
    """One rank of a run_ranks run: train.py's `train` on Config(**fields)."""
    train = script()
    return train.train(train.Config(**fields))


def one_and_two(cfg) -> dict:
    """Train `cfg` on one process and on two that each take half of its micro-batch.

    Returns {"one": result, "two": [rank 0's result, rank 1's]}, results as train.train's.
    """
    if cfg.micro_batch % 2:
        raise ValueError(
            f"one_and_two: `cfg.micro_batch` must be even (two ranks take half each), got "
            f"{cfg.micro_batch}."
        )
    one = ranks(cfg, 1)[0]
    two = ranks(dataclasses.replace(cfg, micro_batch=cfg.micro_batch // 2), 2)
    return {"one": one, "two": two}


def largest_gap(runs: dict) -> float:
    """Return the largest difference between the losses of one and of two processes."""
    return max(
        abs(a["loss"] - b["loss"]) for a, b in zip(runs["one"]["log"], runs["two"][0]["log"])
    )


def trajectory_table(runs: dict, every: int = 1) -> str:
    """Return a Markdown table of the training loss per step on one and on two processes."""
    rows = []
    for a, b in list(zip(runs["one"]["log"], runs["two"][0]["log"]))[::every]:
        gap = abs(a["loss"] - b["loss"])
        rows.append([a["step"], f"{a['loss']:.5f}", f"{b['loss']:.5f}", f"{gap:.1e}"])
    return table(["step", "one process", "two processes", "difference"], rows)


def predicted(cfg, world: int, rank: int):
    """Return gradflow_ref.sharding's prediction of what rank `rank` of `world` holds."""
    shape = MemoryConfig(cfg.n_layers, cfg.hidden, cfg.n_heads, cfg.seq_len, 1, 256)
    return predict_fsdp2([p.shape for p in GPT(shape).parameters()], world, rank)


def held_table(cfg, runs: dict) -> str:
    """Return a Markdown table of the bytes each rank holds, measured and predicted."""
    rows = []
    for result in [runs["one"], *runs["two"]]:
        p = predicted(cfg, result["world"], result["rank"])
        measured = result["held_bytes"]
        if list(measured) != [p.parameters, p.gradients, p.optimizer_states]:
            raise RuntimeError(  # the page says every count matches its prediction
                f"held_table: rank {result['rank']} of {result['world']} holds {measured} bytes, "
                f"predicted {p}"
            )
        rows.append(
            [f"{result['rank']} of {result['world']}"]
            + [
                f"{m:,} ({q:,})"
                for m, q in zip(measured, (p.parameters, p.gradients, p.optimizer_states))
            ]
        )
    return table(["rank", "parameters", "gradients", "AdamW states"], rows)


def stop_and_resume(cfg, precision: str = "fp16") -> dict:
    """Train `cfg` on two processes, saving halfway; resume that checkpoint on one; compare.

    The two processes take half of `cfg.micro_batch` each, so both runs see the same batches.
    Returns {"stopped_at": the steps done when saved, "gap": the largest difference in loss,
    learning rate or loss scale between the resumed steps and the uninterrupted run's,
    "skipped": the steps the scaler skipped before the save, "scales": the loss scale at the
    start and at the save}.
    """
    half = cfg.steps // 2
    if half < 1:
        raise ValueError(f"stop_and_resume: `cfg.steps` must be at least 2, got {cfg.steps}.")
    if cfg.micro_batch % 2:
        raise ValueError(
            f"stop_and_resume: `cfg.micro_batch` must be even (two ranks take half each), got "
            f"{cfg.micro_batch}."
        )
    with tempfile.TemporaryDirectory(prefix="gradflow-resume-") as ckpt:
        run = dataclasses.replace(cfg, precision=precision, ckpt_dir=ckpt, print_every=0)
        two = dataclasses.replace(run, micro_batch=cfg.micro_batch // 2, save_every=half)
        full = ranks(two, 2)[0]["log"]
        for later in Path(ckpt).glob("step-*"):
            if later.name != f"step-{half:06d}":
                shutil.rmtree(later)
        resumed = ranks(dataclasses.replace(run, resume=True), 1)[0]["log"]
    if [r["step"] for r in resumed] != [r["step"] for r in full[half:]]:
        raise RuntimeError("stop_and_resume: the resumed run did not start at the saved step")
    keys = ("loss", "lr", "loss_scale")
    gap = max(abs(a[k] - b[k]) for a, b in zip(resumed, full[half:]) for k in keys)
    skipped = [r["step"] for r in full[:half] if r["skipped"]]
    scales = (full[0]["loss_scale"], full[half]["loss_scale"])
    return {"stopped_at": half, "gap": gap, "skipped": skipped, "scales": scales}
