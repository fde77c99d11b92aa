"""Build side of docs/pipeline.md: the traced-step widget and the GradScaler facts it quotes.

`stage_widget` traces one `Trainer.step` per switch combination (precision, accumulation,
checkpointing) with gradflow_ref.pipeline.trace_step and writes what each stage did in that run.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

import markdown
import torch
from torch import nn

from gradflow_ref.checkpointing import SavedTensorMeter, checkpoint_sequential
from gradflow_ref.pipeline import PipelineConfig, Trainer, trace_step
from gradflow_site.render import build_machine, table
from gradflow_site.widgets import widget

__all__ = [
    "bf16_spacing",
    "build_machine",
    "scaler_calls",
    "spread",
    "scaler_default",
    "stage_widget",
    "trace_combinations",
]


def bf16_spacing(weight: float) -> float:
    """Return the gap between `weight` (nonzero, normal) and the next larger BF16 number.

    BF16 keeps 8 significant bits, so in [2^e, 2^(e+1)) its numbers are 2^(e-7) apart; an update
    below half that gap leaves a BF16 weight unchanged.

    Raises:
        ValueError: `weight` is zero or not finite.
    """
    if not math.isfinite(weight) or weight == 0:
        raise ValueError(f"bf16_spacing: `weight` must be finite and nonzero, got {weight!r}.")
    return 2.0 ** (math.floor(math.log2(abs(weight))) - 7)


def spread(values) -> str:
    """Return the lowest and highest of `values`, e.g. "1.291–1.296" (one value: "1.291")."""
    low, high = min(values), max(values)
    return f"{low:.3f}" if f"{low:.3f}" == f"{high:.3f}" else f"{low:.3f}–{high:.3f}"


# ---------------------------------------------------------------- the traced step, stage by stage


def scaler_default(name: str):
    """Return the default of torch.amp.GradScaler's constructor argument `name`."""
    return inspect.signature(torch.amp.GradScaler).parameters[name].default


def scaler_calls(calls: list[str], scale: float = 2.0**10) -> str | float:
    """Run `calls` on torch.amp.GradScaler in that order, for a weight whose gradient is 1.

    Returns:
        The message of the RuntimeError torch raises, or, when torch accepts the order, the
        gradient the optimizer's step saw (1.0 when the gradients were unscaled exactly once).

    Raises:
        ValueError: a call is not "backward", "unscale_", "step" or "update".
    """
    known = ("backward", "unscale_", "step", "update")
    if any(call not in known for call in calls):
        raise ValueError(f"scaler_calls: `calls` must be drawn from {known}, got {calls}.")
    scaler = torch.amp.GradScaler("cpu", init_scale=scale)
    w = nn.Parameter(torch.ones(1))
    seen = []
    opt = torch.optim.SGD([w], lr=0.0)
    opt.register_step_pre_hook(lambda *_: seen.append(float(w.grad)))
    try:
        for call in calls:
            if call == "backward":
                scaler.scale(w.sum()).backward()
            elif call == "update":
                scaler.update()
            else:
                getattr(scaler, call)(opt)
    except RuntimeError as err:
        return str(err)
    return seen[-1]


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
    static = (
        "<p>FP16 with accumulation and checkpointing, "
        "as traced from one <code>Trainer.step</code>.</p>"
    )
    static += markdown.markdown(
        table(["#", "Stage", "Tensors", "Runs"], rows, "rlll"), extensions=["tables"]
    )
    data = {"combos": combos, "segments": segments}
    return widget("pipeline", data, static=static)
