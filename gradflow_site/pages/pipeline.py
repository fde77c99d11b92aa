"""Build side of docs/pipeline.md: the traced-step widget, the memory calculator, GPU runs.

`stage_widget` traces one `Trainer.step` per switch combination (precision, accumulation,
checkpointing) with gradflow_ref.pipeline.trace_step and writes what each stage did in that run.
`memory_widget` builds the calculator's presets and precision layouts (Trainer's layout first)
from gradflow_ref.memory, plus the sharding payload of gradflow_site.pages.memory.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import fields

import markdown
import torch
from torch import nn

from gradflow_ref.checkpointing import SavedTensorMeter, checkpoint_sequential
from gradflow_ref.loss_scaling import GradScaler
from gradflow_ref.memory import MemoryConfig, parameter_count, training_memory
from gradflow_ref.pipeline import PipelineConfig, Trainer, trace_step
from gradflow_site.pages.memory import sharding_data
from gradflow_site.render import build_machine, table
from gradflow_site.widgets import widget

__all__ = [
    "MEMORY_PRECISIONS",
    "MEMORY_PRESETS",
    "TRAINER_PRECISION",
    "build_machine",
    "bytes_per_param",
    "layout_sizes",
    "memory_data",
    "memory_widget",
    "refusal",
    "scaler_default",
    "stage_widget",
    "trace_combinations",
]

GB = 1e9
f32, b16, f16 = torch.float32, torch.bfloat16, torch.float16
MEMORY_PRESETS = {  # nominal parameter count and a transformer shape of that size
    "125M": (125_000_000, dict(n_layers=12, hidden=768, n_heads=12, seq_len=2048, vocab=50257)),
    "1.3B": (1_300_000_000, dict(n_layers=24, hidden=2048, n_heads=16, seq_len=2048, vocab=50257)),
    "7B": (7_000_000_000, dict(n_layers=32, hidden=4096, n_heads=32, seq_len=4096, vocab=32000)),
    "13B": (13_000_000_000, dict(n_layers=40, hidden=5120, n_heads=40, seq_len=4096, vocab=32000)),
    "70B": (70_000_000_000, dict(n_layers=80, hidden=8192, n_heads=64, seq_len=4096, vocab=32000)),
}
# label, then param, master, grad, optimizer-state, activation dtypes (keys: the widget's contract)
MEMORY_PRECISIONS = {
    "mixed_fp32_grads": ("BF16 mixed, FP32 masters and grads (Trainer)", b16, f32, f32, f32, b16),
    "mixed_bf16": ("BF16 mixed, FP32 master weights, BF16 gradients", b16, f32, b16, f32, b16),
    "mixed_fp16": ("FP16 mixed, FP32 master weights, FP16 gradients", f16, f32, f16, f32, f16),
    "fp32": ("FP32 throughout", f32, None, f32, f32, f32),
    "pure_bf16": ("Pure BF16, no master copy", b16, None, b16, b16, b16),
}  # fmt: skip
TRAINER_PRECISION = "mixed_fp32_grads"  # what gradflow_ref.pipeline.Trainer keeps
DTYPE_FIELDS = ("param_dtype", "master_dtype", "grad_dtype", "state_dtype", "activation_dtype")


def _dtype_name(dtype: torch.dtype | None) -> str | None:
    return None if dtype is None else str(dtype).removeprefix("torch.")


def _layout(key: str) -> dict:
    return dict(zip(DTYPE_FIELDS, MEMORY_PRECISIONS[key][1:]))


# ---------------------------------------------------------------- the traced step, stage by stage


def scaler_default(name: str):
    """Return the default of GradScaler's constructor argument `name`."""
    return inspect.signature(GradScaler).parameters[name].default


def refusal(calls: list[str]) -> str:
    """Return the message of the RuntimeError GradScaler raises for `calls` in that order.

    Raises:
        ValueError: GradScaler accepted every call (the order was not wrong).
    """
    scaler, w = GradScaler(), nn.Parameter(torch.ones(2))
    opt = torch.optim.SGD([w], lr=0.1)
    try:
        for call in calls:
            if call == "backward":
                scaler.scale(w.sum()).backward()
            elif call == "step":
                scaler.step(opt)
            else:
                getattr(scaler, call)(*([opt] if call == "unscale_" else []))
    except RuntimeError as err:
        return str(err)
    raise ValueError(f"refusal: GradScaler accepted the calls {calls}; pass an order it refuses.")


def _run_text(out, trainer, found, meter_bytes, n_batches) -> dict[str, str]:
    """What each stage did in one traced run, as the widget's "In this run" line."""
    cfg = trainer.cfg
    scale = cfg.init_scale if cfg.dtype == torch.float16 else 1.0
    clip = (
        f"cut to {cfg.max_norm}"
        if out.grad_norm > cfg.max_norm
        else f"under the threshold {cfg.max_norm}: left alone"
    )
    return {
        "forward": f"{found['forward'].count} layers run in {found['forward'].dtype}; "
        f"{meter_bytes / 1024:.0f} KiB of activations kept for backward",
        "loss": f"cross-entropy of float32 logits, divided by {n_batches}; "
        f"the step's mean loss is {out.loss:.4f}",
        "scale": f"the float32 loss times {scale:.0f}",
        "backward": f"gradients come out in {found['backward'].dtype}",
        "recompute": f"{found['recompute'].count} layer forwards re-run per micro-batch"
        if "recompute" in found
        else "",
        "accumulate": "each gradient added in float32 to its master's .grad; the model's own "
        ".grad freed",
        "unscale": f"every gradient divided by {scale:.0f}; none was inf or NaN",
        "clip": f"global norm {out.grad_norm:.3f}, {clip}",
        "step": f"AdamW on the float32 masters at learning rate {out.lr:.1e}",
        "update": f"the scale stays {out.scale:.0f}: no overflow, and it grows only after "
        f"{scaler_default('growth_interval')} clean steps in a row",
        "schedule": f"learning rate {out.lr:.1e} now, "
        f"{trainer.schedule.get_last_lr()[0]:.1e} for the next step",
        "cast_back": f"the masters rounded to {found['cast_back'].dtype} into the model",
        "zero": "every .grad of model and masters set to None",
    }


def trace_combinations(
    make_model: Callable[[], nn.Sequential],
    make_batch: Callable[[], tuple[torch.Tensor, torch.Tensor]],
    n_micro: int = 4,
    segments: int = 3,
) -> dict:
    """Trace one step per (precision, accumulation, checkpointing); return the widget's combos.

    Keys are "<bf16|fp16>-<accumulate 0|1>-<checkpointed 0|1>"; each holds the micro-batch
    count and the stages of micro-batch 0 and after the loop as [name, dtype, in_loop, text].
    """
    combos = {}
    for precision, dtype in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        for accumulate in (False, True):
            for checkpointed in (False, True):
                cfg = PipelineConfig(
                    lr=1e-3,
                    min_lr=1e-4,
                    warmup_steps=10,
                    total_steps=100,
                    dtype=dtype,
                    segments=segments if checkpointed else 1,
                )
                trainer = Trainer(make_model(), cfg)
                batches = [make_batch() for _ in range(n_micro if accumulate else 1)]
                out, stages = trace_step(trainer, batches)
                loop = [s for s in stages if s.micro_batch == 0]
                after = [s for s in stages if s.micro_batch is None]
                if [s.name for s in stages] != [s.name for _ in batches for s in loop] + [
                    s.name for s in after
                ] or out.skipped:
                    raise RuntimeError(f"trace_combinations: {precision} step ran unevenly.")
                with SavedTensorMeter() as meter:
                    checkpoint_sequential(trainer.model, cfg.segments, batches[0][0].to(dtype))
                found = {s.name: s for s in loop + after}
                run = _run_text(out, trainer, found, meter.bytes, len(batches))
                combos[f"{precision}-{int(accumulate)}-{int(checkpointed)}"] = {
                    "micro": len(batches),
                    "stages": [
                        [s.name, s.dtype, int(s.micro_batch is not None), run[s.name]]
                        for s in loop + after
                    ],
                }
    return combos


def stage_widget(
    make_model: Callable[[], nn.Sequential],
    make_batch: Callable[[], tuple[torch.Tensor, torch.Tensor]],
    gen: torch.Generator,
    n_micro: int = 4,
    segments: int = 3,
) -> str:
    """Return the HTML of the "pipeline" widget, traced from real steps of the page's model.

    What the widget says about each stage is prose: the chapter's stage table
    (`.gf-stage-notes` in docs/pipeline.md), which the widget reads in the browser.
    The random state of `gen` (which `make_batch` draws from) and torch's global generator
    (which `make_model` seeds) are restored afterwards, so the page's later blocks compute what
    they would compute without this one.
    """
    saved = gen.get_state()
    with torch.random.fork_rng(devices=[]):
        combos = trace_combinations(make_model, make_batch, n_micro, segments)
    gen.set_state(saved)
    full = combos["fp16-1-1"]
    rows = [
        [
            i + 1,
            f"`{name}`",
            dtype or "–",
            f"per micro-batch (×{full['micro']})" if in_loop else "once per step",
        ]
        for i, (name, dtype, in_loop, _) in enumerate(full["stages"])
    ]
    static = "<p>FP16 with accumulation and checkpointing, as traced at build time.</p>"
    static += markdown.markdown(
        table(["#", "Stage", "Tensors", "Runs"], rows, "rlll"), extensions=["tables"]
    )
    data = {"combos": combos, "segments": segments}
    return widget("pipeline", data, static=static)


# ---------------------------------------------------------------- the memory calculator


def memory_data(shape: dict) -> dict:
    """Return the calculator's payload: presets, precision layouts, defaults, sharding.

    `shape` is the page's 7B configuration (MemoryConfig fields); the 7B preset must agree
    with it, and the calculator opens on it in Trainer's layout.

    Raises:
        ValueError: a preset's shape is more than 10% off its nominal size, or the 7B preset
            differs from `shape`.
    """
    presets = []
    for name, (nominal, preset_shape) in MEMORY_PRESETS.items():
        layout = parameter_count(MemoryConfig(**preset_shape))
        if abs(layout / nominal - 1) >= 0.1:
            raise ValueError(f"memory_data: preset {name} lays out {layout:,} parameters.")
        presets.append({"name": name, "n_params": nominal, "layout_params": layout, **preset_shape})
    nominal, seven = MEMORY_PRESETS["7B"]
    if {k: shape.get(k) for k in seven} != seven or shape.get("n_params") != nominal:
        raise ValueError(f"memory_data: the 7B preset {seven} differs from `shape` {shape}.")
    return {
        "presets": presets,
        "precisions": {
            key: {"label": label} | {f: _dtype_name(d) for f, d in zip(DTYPE_FIELDS, dtypes)}
            for key, (label, *dtypes) in MEMORY_PRECISIONS.items()
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
            "precision": TRAINER_PRECISION,
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
    for key in MEMORY_PRECISIONS:
        m = training_memory(MemoryConfig(**shape | _layout(key)))
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
    for preset in data["presets"]:
        keys = ("n_layers", "hidden", "n_heads", "seq_len", "vocab", "n_params")
        cfg = MemoryConfig(
            **{k: preset[k] for k in keys},
            dropout=False,
            stores_scores=False,
            **_layout(TRAINER_PRECISION),
        )
        plain = training_memory(cfg)
        full_ckpt = training_memory(MemoryConfig(**vars(cfg) | {"checkpointing": "full"}))
        rows.append(
            [
                preset["name"],
                f"{preset['n_layers']} × {preset['hidden']}, {preset['seq_len']} tokens",
                f"{(plain.total - plain.activations) / GB:,.1f}",
                f"{plain.activations / GB:,.1f}",
                f"{full_ckpt.activations / GB:,.1f}",
            ]
        )
    headers = ["Model", "Layers × hidden, sequence", "State (GB)", "Activations (GB)"]
    static = (
        f"<p>{MEMORY_PRECISIONS[TRAINER_PRECISION][0]}, AdamW, one sequence per micro-batch, "
        "fused attention, no dropout; GB = 10<sup>9</sup> bytes.</p>"
    )
    static += markdown.markdown(
        table([*headers, "Checkpointed (GB)"], rows, "llrrr"), extensions=["tables"]
    )
    return widget("memory", data, static=static)
