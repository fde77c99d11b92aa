"""Build side of docs/memory.md: the memory calculator, ZeRO tables and the FSDP2 run's table.

Builders only: the arithmetic is gradflow_ref.memory and gradflow_ref.sharding, the GPU sizes
gradflow_ref.hardware. `memory_data` and `memory_widget` make the calculator's payload and its
static table; the other functions return Markdown for one-line executed blocks.
"""

from __future__ import annotations

from dataclasses import fields

import markdown
import torch

from gradflow_ref.hardware import GPUS, gpu
from gradflow_ref.memory import MemoryConfig, parameter_count, training_memory
from gradflow_ref.sharding import STAGES, FSDPRun, sharded_memory
from gradflow_site.render import table
from gradflow_site.widgets import widget

__all__ = [
    "PRESETS",
    "PRECISIONS",
    "DEFAULT_PRECISION",
    "layout",
    "preset",
    "memory_data",
    "bytes_per_param",
    "layout_sizes",
    "memory_widget",
    "zero_table",
    "fits",
    "fsdp_table",
    "sharding_data",
]

GB = 1e9  # the datasheets' unit: 80 GB = 80e9 bytes
f32, b16, f16 = torch.float32, torch.bfloat16, torch.float16
PRESETS = {  # nominal parameter count and a transformer shape of that size (LLaMA-like from 7B)
    "125M": (125_000_000, dict(n_layers=12, hidden=768, n_heads=12, seq_len=2048, vocab=50257)),
    "1.3B": (1_300_000_000, dict(n_layers=24, hidden=2048, n_heads=16, seq_len=2048, vocab=50257)),
    "7B": (7_000_000_000, dict(n_layers=32, hidden=4096, n_heads=32, seq_len=4096, vocab=32000)),
    "13B": (13_000_000_000, dict(n_layers=40, hidden=5120, n_heads=40, seq_len=4096, vocab=32000)),
    "70B": (70_000_000_000, dict(n_layers=80, hidden=8192, n_heads=64, seq_len=4096, vocab=32000)),
}
# label, then param, master, grad, optimizer-state, activation dtypes (keys: the widget's contract)
PRECISIONS = {
    "autocast_bf16": ("BF16 autocast, FP32 parameters as masters", f32, None, f32, f32, b16),
    "trainer_bf16": ("BF16 weights, FP32 masters and gradients (Trainer)", b16, f32, f32, f32, b16),
    "mixed_bf16": ("BF16 weights, FP32 masters, BF16 gradients", b16, f32, b16, f32, b16),
    "mixed_fp16": ("FP16 weights, FP32 masters, FP16 gradients", f16, f32, f16, f32, f16),
    "fp32": ("FP32 throughout", f32, None, f32, f32, f32),
    "pure_bf16": ("Pure BF16, no master copy", b16, None, b16, b16, b16),
}  # fmt: skip
DEFAULT_PRECISION = "autocast_bf16"  # what torch.autocast with FP32 parameters keeps
DTYPE_FIELDS = ("param_dtype", "master_dtype", "grad_dtype", "state_dtype", "activation_dtype")
STAGE_NAMES = {0: "none (DDP)", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3 / FSDP"}


def _dtype_name(dtype: torch.dtype | None) -> str | None:
    return None if dtype is None else str(dtype).removeprefix("torch.")


def layout(key: str = DEFAULT_PRECISION) -> dict:
    """Return the MemoryConfig dtype fields of precision layout `key` (one of PRECISIONS).

    Raises:
        ValueError: `key` is not a layout of PRECISIONS.
    """
    if key not in PRECISIONS:
        raise ValueError(f"layout: `key` must be one of {sorted(PRECISIONS)}, got {key!r}.")
    return dict(zip(DTYPE_FIELDS, PRECISIONS[key][1:]))


def preset(name: str, checkpointing: str = "full", precision: str = DEFAULT_PRECISION):
    """Return the MemoryConfig of preset `name` (one sequence, fused attention, no dropout).

    Raises:
        ValueError: `name` is not a preset, or `precision` not a layout.
    """
    if name not in PRESETS:
        raise ValueError(f"preset: `name` must be one of {sorted(PRESETS)}, got {name!r}.")
    n_params, shape = PRESETS[name]
    return MemoryConfig(
        n_params=n_params,
        dropout=False,
        stores_scores=False,
        checkpointing=checkpointing,
        **shape,
        **layout(precision),
    )


# ---------------------------------------------------------------- the memory calculator


def memory_data(shape: dict) -> dict:
    """Return the calculator's payload: presets, precision layouts, defaults, sharding.

    `shape` is the page's 7B configuration (MemoryConfig fields); the 7B preset must agree
    with it, and the calculator opens on it in the default (autocast) layout.

    Raises:
        ValueError: a preset's shape is more than 10% off its nominal size, or the 7B preset
            differs from `shape`.
    """
    presets = []
    for name, (nominal, preset_shape) in PRESETS.items():
        laid_out = parameter_count(MemoryConfig(**preset_shape))
        if abs(laid_out / nominal - 1) >= 0.1:
            raise ValueError(f"memory_data: preset {name} lays out {laid_out:,} parameters.")
        presets.append(
            {"name": name, "n_params": nominal, "layout_params": laid_out, **preset_shape}
        )
    nominal, seven = PRESETS["7B"]
    if {k: shape.get(k) for k in seven} != seven or shape.get("n_params") != nominal:
        raise ValueError(f"memory_data: the 7B preset {seven} differs from `shape` {shape}.")
    return {
        "presets": presets,
        "precisions": {
            key: {"label": label} | {f: _dtype_name(d) for f, d in zip(DTYPE_FIELDS, dtypes)}
            for key, (label, *dtypes) in PRECISIONS.items()
        },
        "itemsize": {_dtype_name(d): d.itemsize for d in (f32, b16, f16)},
        "config": {
            f.name: _dtype_name(f.default) if isinstance(f.default, torch.dtype) else f.default
            for f in fields(MemoryConfig)
        },
        "states": {  # optimizer states per parameter, read back from the calculator
            opt: training_memory(MemoryConfig(n_params=1, optimizer=opt)).optimizer_states
            // MemoryConfig.state_dtype.itemsize
            for opt in ("adamw", "adam", "sgd_momentum", "sgd")
        },
        "defaults": {
            "preset": "7B",
            "precision": DEFAULT_PRECISION,
            "optimizer": "adamw",
            "checkpointing": "none",
            "micro_batch": shape.get("micro_batch", 1),
            "stores_scores": shape["stores_scores"],
            "dropout": shape["dropout"],
            "mask_bytes": MemoryConfig.mask_bytes,
        },
        "sharding": sharding_data(),
    }


def bytes_per_param(shape: dict) -> dict[str, int]:
    """Return the model state (all but activations) per parameter of each precision layout."""
    out = {}
    for key in PRECISIONS:
        m = training_memory(MemoryConfig(**shape | layout(key)))
        out[key] = (m.total - m.activations) // shape["n_params"]
    return out


def layout_sizes(data: dict) -> str:
    """Return the parameter count of each preset's shape, e.g. "6.74B (7B), ..."."""
    return ", ".join(
        (f"{n / 1e9:.2f}B" if (n := p["layout_params"]) >= 1e9 else f"{n / 1e6:.1f}M")
        + f" ({p['name']})"
        for p in data["presets"]
    )


def memory_widget(data: dict) -> str:
    """Return the HTML of the "memory" calculator; without JavaScript, a table of the presets."""
    rows = []
    for name in PRESETS:
        plain = training_memory(preset(name, checkpointing="none"))
        full_ckpt = training_memory(preset(name, checkpointing="full"))
        _, shape = PRESETS[name]
        rows.append(
            [
                name,
                f"{shape['n_layers']} × {shape['hidden']}, {shape['seq_len']} tokens",
                f"{(plain.total - plain.activations) / GB:,.1f}",
                f"{plain.activations / GB:,.1f}",
                f"{full_ckpt.activations / GB:,.1f}",
            ]
        )
    headers = ["Model", "Layers × hidden, sequence", "State (GB)", "Activations (GB)"]
    static = (
        f"<p>{PRECISIONS[DEFAULT_PRECISION][0]}, AdamW, one sequence per micro-batch, "
        "fused attention, no dropout; GB = 10<sup>9</sup> bytes.</p>"
    )
    static += markdown.markdown(
        table([*headers, "Checkpointed (GB)"], rows, "llrrr"), extensions=["tables"]
    )
    return widget("memory", data, static=static)


# ---------------------------------------------------------------- sharding


def fits(cfg: MemoryConfig, n_gpus: int, stage: int, card: str = "H100 SXM") -> bool:
    """Return whether one GPU's share under `stage` fits the memory of `card`."""
    return sharded_memory(cfg, n_gpus, stage).total <= gpu(card).memory_bytes


def zero_table(cfg: MemoryConfig, n_gpus: int, card: str = "H100 SXM") -> str:
    """Return a Markdown table: per-GPU GB of each part under every ZeRO stage, and the fit.

    A layout without a separate master copy (autocast's: the FP32 parameters are the masters)
    gets no master column.
    """
    parts = ["weights", "master_weights", "gradients", "optimizer_states", "activations"]
    if cfg.master_dtype is None:
        parts.remove("master_weights")
    rows = []
    for stage in STAGES:
        m = sharded_memory(cfg, n_gpus, stage)
        rows.append(
            [
                STAGE_NAMES[stage],
                *(f"{getattr(m, p) / GB:.1f}" for p in parts),
                f"**{m.total / GB:.1f}**",
                "yes" if m.total <= gpu(card).memory_bytes else "no",
            ]
        )
    names = {
        "weights": "weights" if cfg.master_dtype else "weights (the masters)",
        "master_weights": "master",
        "gradients": "gradients",
        "optimizer_states": "Adam states",
        "activations": "activations",
    }
    headers = [names[p] for p in parts]
    fit = f"fits {card} ({gpu(card).memory_bytes / GB:.0f} GB)"
    align = "l" + "r" * (len(parts) + 1) + "l"
    return table(["sharding", *headers, "total GB", fit], rows, align=align)


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
