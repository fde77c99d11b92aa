"""Chapter 7's memory endgame: per-GPU bytes under ZeRO stages, and the FSDP2 run's table.

Builders only: the arithmetic is gradflow_ref.memory and gradflow_ref.sharding, the GPU sizes
gradflow_ref.hardware. Each function returns Markdown for a one-line executed block.
"""

from __future__ import annotations

import torch

from gradflow_ref.hardware import GPUS, gpu
from gradflow_ref.memory import MemoryConfig
from gradflow_ref.sharding import STAGES, FSDPRun, sharded_memory
from gradflow_site.render import table

__all__ = [
    "PRESETS",
    "TRAINER_LAYOUT",
    "preset",
    "zero_table",
    "fits",
    "fsdp_table",
    "sharding_data",
]

GB = 1e9  # the datasheets' unit: 80 GB = 80e9 bytes
# nominal parameter count and a transformer shape of that size (LLaMA-like for 7B and up)
PRESETS = {
    "7B": (7_000_000_000, dict(n_layers=32, hidden=4096, n_heads=32, seq_len=4096, vocab=32000)),
    "13B": (13_000_000_000, dict(n_layers=40, hidden=5120, n_heads=40, seq_len=4096, vocab=32000)),
    "70B": (70_000_000_000, dict(n_layers=80, hidden=8192, n_heads=64, seq_len=4096, vocab=32000)),
}
# what gradflow_ref.pipeline.Trainer keeps: BF16 weights for compute, FP32 master weights with
# FP32 gradients on them, FP32 AdamW states
TRAINER_LAYOUT = dict(
    param_dtype=torch.bfloat16,
    master_dtype=torch.float32,
    grad_dtype=torch.float32,
    state_dtype=torch.float32,
    activation_dtype=torch.bfloat16,
)
STAGE_NAMES = {0: "none (DDP)", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3 / FSDP"}


def preset(name: str, checkpointing: str = "full", **layout) -> MemoryConfig:
    """Return the MemoryConfig of preset `name` in Trainer's layout (or `layout`'s dtypes)."""
    if name not in PRESETS:
        raise ValueError(f"preset: `name` must be one of {sorted(PRESETS)}, got {name!r}.")
    n_params, shape = PRESETS[name]
    return MemoryConfig(
        n_params=n_params, checkpointing=checkpointing, **shape, **(TRAINER_LAYOUT | layout)
    )


def fits(cfg: MemoryConfig, n_gpus: int, stage: int, card: str = "H100 SXM") -> bool:
    """Return whether one GPU's share under `stage` fits the memory of `card`."""
    return sharded_memory(cfg, n_gpus, stage).total <= gpu(card).memory_bytes


def zero_table(cfg: MemoryConfig, n_gpus: int, card: str = "H100 SXM") -> str:
    """Return a Markdown table: per-GPU GB of each part under every ZeRO stage, and the fit."""
    rows = []
    for stage in STAGES:
        m = sharded_memory(cfg, n_gpus, stage)
        parts = (m.weights, m.master_weights, m.gradients, m.optimizer_states, m.activations)
        rows.append(
            [
                STAGE_NAMES[stage],
                *(f"{b / GB:.1f}" for b in parts),
                f"**{m.total / GB:.1f}**",
                "yes" if m.total <= gpu(card).memory_bytes else "no",
            ]
        )
    return table(
        [
            "sharding",
            "weights",
            "master",
            "gradients",
            "Adam states",
            "activations",
            "total GB",
            f"fits {card} ({gpu(card).memory_bytes / GB:.0f} GB)",
        ],
        rows,
        align="lrrrrrrl",
    )


def fsdp_table(runs: list[FSDPRun], predicted: list[FSDPRun]) -> str:
    """Return a Markdown table of each rank's measured bytes beside the prediction."""
    rows = []
    for rank, (got, want) in enumerate(zip(runs, predicted)):
        for part in ("parameters", "gradients", "optimizer_states"):
            a, b = getattr(got, part), getattr(want, part)
            rows.append(
                [
                    str(rank),
                    part.replace("_", " "),
                    f"{a:,}",
                    f"{b:,}",
                    "equal" if a == b else f"off by {a - b:+,}",
                ]
            )
    return table(["rank", "state", "measured bytes", "predicted bytes", ""], rows, align="llrrl")


def sharding_data(n_gpus: int = 8, stage: int = 0, card: str = "H100 SXM") -> dict:
    """Return the memory calculator's sharding payload: what each stage shards, GPU sizes."""
    return {
        "stages": {str(k): list(v) for k, v in STAGES.items()},
        "gpus": [[name, g.memory_bytes] for name, g in GPUS.items()],
        "defaults": {"gpus": n_gpus, "stage": stage, "gpu": card},
    }
