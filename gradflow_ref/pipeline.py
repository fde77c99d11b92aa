"""The modern training step: every technique of the guide, stacked in the order that works.

Taught in docs/pipeline.md. One optimizer step: BF16 (or FP16) forward through checkpointed
segments, FP32 loss, gradients summed in FP32 over micro-batches, unscale (FP16 only), one
global-norm clip, AdamW (Loshchilov & Hutter 2019) on FP32 master weights (Micikevicius et al.
2018), linear warmup then cosine decay (Loshchilov & Hutter 2017), cast back, zero.
"""

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from gradflow_ref import _checks
from gradflow_ref.checkpointing import checkpoint_sequential
from gradflow_ref.clipping import clip_grad_norm_
from gradflow_ref.loss_scaling import GradScaler
from gradflow_ref.master import MasterWeights

__all__ = [
    "BUGS",
    "STAGES",
    "PipelineConfig",
    "StepReport",
    "Stage",
    "warmup_cosine",
    "WarmupCosine",
    "Trainer",
    "trace_step",
]

# Deliberate ordering bugs the chapter demonstrates (PipelineConfig.bug):
BUGS = (
    "clip_scaled",  # clip before unscaling: the threshold meets gradients times the loss scale
    "clip_per_micro",  # clip inside the micro-batch loop (instead of once): partial sums clipped
    "schedule_on_skip",  # step the LR schedule on a step the scaler skipped
    "no_zero",  # never zero the gradients: each step adds the previous steps' gradients
)

# What trace_step records, in the order a correct step runs them:
STAGES = (
    "forward",  # layer forwards of one micro-batch, in the working dtype
    "loss",  # the loss function on the FP32 logits
    "scale",  # FP16 only: loss times the loss scale
    "backward",  # autograd reaches the loss and runs back through the layers
    "recompute",  # checkpointing: layer forwards re-run inside backward
    "accumulate",  # the micro-batch's gradients added into the FP32 masters
    "unscale",  # FP16 only: gradients divided by the loss scale, inf/NaN recorded
    "clip",  # global-norm clip
    "step",  # AdamW updated the FP32 masters (absent when the scaler skipped)
    "update",  # FP16 only: the loss scale backs off or grows
    "schedule",  # learning rate for the next step
    "cast_back",  # FP32 masters copied into the working-precision model
    "zero",  # gradients of model and masters cleared
)


@dataclass
class PipelineConfig:
    lr: float = 3e-4  # peak learning rate, reached at the last warmup step
    min_lr: float = 3e-5  # learning rate at the end of the cosine decay, and after it
    warmup_steps: int = 100  # optimizer steps of linear warmup, >= 1
    total_steps: int = 1000  # optimizer steps of warmup plus decay, > warmup_steps
    betas: tuple[float, float] = (0.9, 0.95)  # AdamW moment decay rates
    eps: float = 1e-8  # AdamW denominator epsilon
    weight_decay: float = 0.1  # AdamW decoupled weight decay
    max_norm: float = 1.0  # global gradient-norm clip threshold
    dtype: torch.dtype = torch.bfloat16  # working precision; torch.float16 turns on loss scaling
    segments: int = 1  # checkpoint_sequential segments over the model (1: no checkpointing)
    init_scale: float = 2.0**16  # FP16 only: the first loss scale
    bug: str | None = None  # one of BUGS, to show what it breaks; None: the correct order


@dataclass
class StepReport:
    loss: float  # mean FP32 loss over the step's micro-batches
    grad_norm: float  # global gradient norm before clipping (unscaled; inf or nan on FP16 overflow)
    lr: float  # learning rate this step used
    skipped: bool  # the scaler skipped the update (inf/NaN gradients)
    scale: float  # loss scale after this step's update (1.0 in BF16)


@dataclass
class Stage:
    name: str  # one of STAGES
    micro_batch: int | None  # index of the micro-batch whose loop ran it; None: after the loop
    dtype: str | None  # dtype of the tensors it produced ("bfloat16", ...); None: no tensor
    count: int = 1  # layer forwards (forward, recompute); 1 for the other stages


def _finite(func, name, value, low=0.0, strict=True):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{func}: `{name}` must be a float, got {type(value).__name__}.")
    if not math.isfinite(value) or value < low or (strict and value == low):
        bound = f"> {low}" if strict else f">= {low}"
        raise ValueError(f"{func}: `{name}` must be finite and {bound}, got {value!r}.")
    return float(value)


def _steps(func, name, value, low):
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{func}: `{name}` must be an int, got {type(value).__name__}.")
    if value < low:
        raise ValueError(f"{func}: `{name}` must be >= {low}, got {value}.")
    return value


def warmup_cosine(step, lr, warmup_steps, total_steps, min_lr=0.0) -> float:
    """Return the learning rate after `step` optimizer steps: linear warmup, then cosine decay.

    lr * (step + 1) / warmup_steps while step < warmup_steps, then
    min_lr + (lr - min_lr) * (1 + cos(pi * t)) / 2 with t = (step - warmup_steps) /
    (total_steps - warmup_steps), held at min_lr once t >= 1.

    Raises:
        ValueError: `lr` not positive and finite, `min_lr` outside [0, lr], `warmup_steps` < 1,
            `total_steps` <= `warmup_steps`, or `step` < 0.
    """
    func = "warmup_cosine"
    lr = _finite(func, "lr", lr)
    min_lr = _finite(func, "min_lr", min_lr, strict=False)
    if min_lr > lr:
        raise ValueError(f"{func}: `min_lr` ({min_lr}) must not exceed `lr` ({lr}).")
    warmup_steps = _steps(func, "warmup_steps", warmup_steps, 1)
    total_steps = _steps(func, "total_steps", total_steps, warmup_steps + 1)
    step = _steps(func, "step", step, 0)
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    t = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
    return min_lr + 0.5 * (lr - min_lr) * (1.0 + math.cos(math.pi * t))


class WarmupCosine:
    """Set every param group's lr to `warmup_cosine` of its initial lr; call step() per update.

    Equivalent to torch's SequentialLR(LinearLR(start_factor=1/warmup_steps, total_iters=
    warmup_steps - 1), CosineAnnealingLR(T_max=total_steps - warmup_steps, eta_min=min_lr),
    milestones=[warmup_steps]) up to total_steps; after that it holds min_lr.
    """

    def __init__(self, optimizer, warmup_steps, total_steps, min_lr=0.0):
        _checks.instance("WarmupCosine", "optimizer", optimizer, torch.optim.Optimizer)
        self.optimizer = optimizer
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]
        self.warmup_steps, self.total_steps, self.min_lr = warmup_steps, total_steps, min_lr
        self.last_step = 0  # optimizer steps taken so far
        self._apply()

    def _apply(self):
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = warmup_cosine(
                self.last_step, base, self.warmup_steps, self.total_steps, self.min_lr
            )

    def step(self) -> None:
        """Advance one optimizer step and set the next learning rate."""
        self.last_step += 1
        self._apply()

    def get_last_lr(self) -> list[float]:
        """Return the learning rate of each param group, as torch schedulers do."""
        return [group["lr"] for group in self.optimizer.param_groups]


class Trainer:
    """Run optimizer steps of the full stack on an `nn.Sequential` model.

    The model is cast to `cfg.dtype`; AdamW and the schedule act on FP32 master copies. Each
    micro-batch's low-precision gradients are added into the masters' FP32 `.grad` right after its
    backward (summing in BF16 would round every addition to 8 significant bits).

    Args:
        model: an nn.Sequential of one-tensor layers, all parameters on one device.
        cfg: the step's hyperparameters and precision; PipelineConfig() by default.
        loss_fn: loss of (FP32 logits, targets); mean cross-entropy by default.

    Raises:
        TypeError: `model` is not an nn.Sequential.
        ValueError: parameters on more than one device, or a bad `cfg` value.

    Example:
        >>> trainer = Trainer(nn.Sequential(nn.Linear(8, 32), nn.GELU(), nn.Linear(32, 4)))
        >>> batches = [(torch.randn(16, 8), torch.randint(0, 4, (16,))) for _ in range(4)]
        >>> report = trainer.step(batches)  # one optimizer step over four micro-batches
    """

    def __init__(self, model, cfg: PipelineConfig | None = None, loss_fn: Callable | None = None):
        name, cfg = "Trainer", PipelineConfig() if cfg is None else cfg
        _checks.instance(name, "cfg", cfg, PipelineConfig, "Pass PipelineConfig() or None.")
        if not isinstance(model, nn.Sequential):
            raise TypeError(
                f"{name}: `model` must be an nn.Sequential (its layers are checkpointed in "
                f"segments), got {type(model).__name__}."
            )
        devices = sorted({str(p.device) for p in model.parameters()})
        if len(devices) != 1:
            raise ValueError(
                f"{name}: all parameters must be on one device, got {devices or 'no parameters'}; "
                "move the model with model.to(device) first."
            )
        if cfg.dtype not in (torch.bfloat16, torch.float16):
            raise ValueError(
                f"{name}: `cfg.dtype` must be torch.bfloat16 or torch.float16, got {cfg.dtype}."
            )
        if cfg.bug is not None and cfg.bug not in BUGS:
            raise ValueError(f"{name}: `cfg.bug` must be None or one of {BUGS}, got {cfg.bug!r}.")
        if (
            isinstance(cfg.segments, bool)
            or not isinstance(cfg.segments, int)
            or not (1 <= cfg.segments <= len(model))
        ):
            raise ValueError(
                f"{name}: `cfg.segments` must be an int between 1 and the number of "
                f"layers ({len(model)}), got {cfg.segments!r}."
            )
        _finite(name, "cfg.max_norm", cfg.max_norm)
        warmup_cosine(0, cfg.lr, cfg.warmup_steps, cfg.total_steps, cfg.min_lr)  # checks them
        self.cfg, self.loss_fn = cfg, loss_fn or F.cross_entropy
        self.device = next(model.parameters()).device
        self.master = MasterWeights(model, dtype=cfg.dtype)
        self.model = self.master.model
        self.optimizer = torch.optim.AdamW(
            self.master.params,
            lr=cfg.lr,
            betas=cfg.betas,
            eps=cfg.eps,
            weight_decay=cfg.weight_decay,
        )
        self.schedule = WarmupCosine(self.optimizer, cfg.warmup_steps, cfg.total_steps, cfg.min_lr)
        self.scaler = GradScaler(
            self.device.type, init_scale=cfg.init_scale, enabled=cfg.dtype == torch.float16
        )

    def _loss(self, x, y):
        x = x.to(self.device, self.cfg.dtype) if x.is_floating_point() else x.to(self.device)
        logits = checkpoint_sequential(self.model, self.cfg.segments, x)  # cfg.dtype
        return self.loss_fn(logits.float(), y.to(self.device))  # FP32 loss

    def _check_batches(self, micro_batches) -> None:
        func = "Trainer.step"
        if len(micro_batches) == 0:
            raise ValueError(
                f"{func}: `micro_batches` must hold at least one (inputs, targets) pair, got none."
            )
        for i, pair in enumerate(micro_batches):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
                raise TypeError(
                    f"{func}: `micro_batches[{i}]` must be an (inputs, targets) pair, "
                    f"got {type(pair).__name__}."
                )
            x = _checks.model_input(func, f"micro_batches[{i}][0]", self.model, pair[0])
            y = _checks.instance(func, f"micro_batches[{i}][1]", pair[1], torch.Tensor)
            if y.dim() == 0 or len(y) != len(x):
                raise ValueError(
                    f"{func}: `micro_batches[{i}]` must hold one target per input row, got "
                    f"{len(x)} rows and targets of shape {tuple(y.shape)}."
                )

    @torch.no_grad()
    def _accumulate(self):
        for p, m in zip(self.model.parameters(), self.master.params):
            if p.grad is not None:
                g = p.grad.float()
                m.grad = g if m.grad is None else m.grad.add_(g)
                p.grad = None

    def step(self, micro_batches: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> StepReport:
        """Take one optimizer step over `micro_batches`, a list of (inputs, targets) pairs.

        Raises:
            TypeError: a micro-batch is not an (inputs, targets) pair of tensors.
            ValueError: `micro_batches` is empty, or a micro-batch is empty, has the wrong
                width, or has as many targets as inputs.
        """
        self._check_batches(micro_batches)
        cfg, bug, n = self.cfg, self.cfg.bug, len(micro_batches)
        lr, loss_sum, norm = self.optimizer.param_groups[0]["lr"], 0.0, None
        for x, y in micro_batches:
            loss = self._loss(x, y) / n  # mean over the step's micro-batches
            self.scaler.scale(loss).backward()  # FP16: times the loss scale
            loss_sum += loss.item()
            self._accumulate()
            if bug == "clip_per_micro":
                norm = clip_grad_norm_(self.master.params, cfg.max_norm)
        if bug == "clip_scaled":
            norm = clip_grad_norm_(self.master.params, cfg.max_norm)
        self.scaler.unscale_(self.optimizer)  # FP16: divide by the scale, record inf/NaN
        if bug not in ("clip_scaled", "clip_per_micro"):
            norm = clip_grad_norm_(self.master.params, cfg.max_norm)  # once, on true gradients
        skipped_before = self.scaler.skipped_steps
        self.scaler.step(self.optimizer)  # AdamW on the FP32 masters, unless inf/NaN
        skipped = self.scaler.skipped_steps > skipped_before
        self.scaler.update()
        if not skipped or bug == "schedule_on_skip":
            self.schedule.step()
        self.master.master_to_model()  # cast back: FP32 masters -> model dtype
        if bug != "no_zero":
            self.master.zero_grad()
        return StepReport(loss_sum, float(norm), lr, skipped, self.scaler.get_scale())


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def trace_step(trainer: Trainer, micro_batches) -> tuple[StepReport, list[Stage]]:
    """Run `trainer.step(micro_batches)` and record every stage as it runs, in order.

    The trainer's parts (loss function, scaler, optimizer, schedule, master weights, layers) are
    observed through hooks and wrappers that are removed afterwards, so the step computes
    exactly what an untraced step computes. A stage that does nothing (the scaler's, in BF16) or
    did not happen (an optimizer step the scaler skipped) is not recorded.

    Returns:
        The step's StepReport and its Stage list, in execution order.

    Example:
        >>> x, y = torch.randn(3, 4), torch.tensor([0, 1, 1])
        >>> _, stages = trace_step(Trainer(nn.Sequential(nn.Linear(4, 2))), [(x, y)])
        >>> " ".join(s.name for s in stages)
        'forward loss backward accumulate clip step schedule cast_back zero'
    """
    _checks.instance("trace_step", "trainer", trainer, Trainer, "Pass Trainer(model, cfg).")
    trainer._check_batches(micro_batches)
    tracer = _Tracer(trainer)
    tracer.install()
    try:
        report = trainer.step(_Loop(tracer, micro_batches))
    finally:
        tracer.remove()
    return report, tracer.stages


class _Loop:
    """The step's `for x, y in micro_batches`, seen from inside: tells the tracer the index."""

    def __init__(self, tracer: "_Tracer", micro_batches):
        self.tracer, self.micro_batches = tracer, micro_batches

    def __len__(self):
        return len(self.micro_batches)

    def __iter__(self):
        for i, batch in enumerate(self.micro_batches):
            self.tracer.micro = i
            yield batch
        self.tracer.micro = None


class _Tracer:
    """Records a Trainer's step as Stages through hooks and wrappers that remove() undoes."""

    def __init__(self, trainer: Trainer):
        self.trainer, self.stages = trainer, []
        self.micro: int | None = None  # index of the micro-batch running; None after the loop
        self.backward = False  # inside autograd's backward (layer forwards are recomputes)
        self.undo: list[Callable[[], None]] = []
        self.hooks: list = []

    def add(self, name, dtype=None):
        self.stages.append(Stage(name, self.micro, dtype and _name(dtype)))

    def on_layer(self, module, args):  # a layer starts; args[0] is its input activation
        name = "recompute" if self.backward else "forward"
        last = self.stages[-1] if self.stages else None
        if last and last.name == name and last.micro_batch == self.micro:
            last.count += 1  # the next layer of the same pass
        else:
            self.add(name, args[0].dtype)

    def on_backward(self, grad):  # autograd reached the loss: backward has started
        self.backward = True
        self.add("backward")

    def on_scale(self, out):
        if self.trainer.scaler.is_enabled():
            self.add("scale", out.dtype)
        out.register_hook(self.on_backward)

    def before_accumulate(self):  # backward has returned; its gradients are still on the model
        self.backward = False
        backward = next(s for s in reversed(self.stages) if s.name == "backward")
        grads = (p.grad for p in self.trainer.model.parameters() if p.grad is not None)
        backward.dtype = _name(next(grads).dtype)

    def on_clip(self, params, *_):
        self.add("clip", params[0].grad.dtype)

    def on_scaler(self, name):
        return lambda _: self.trainer.scaler.is_enabled() and self.add(name, torch.float32)

    def watch(self, obj, attr, after=None, before=None):  # before(*args), after(result)
        original = getattr(obj, attr)

        def watched(*args, **kwargs):
            if before:
                before(*args)
            out = original(*args, **kwargs)
            if after:
                after(out)
            return out

        own = attr in vars(obj)  # an instance attribute or module global, not a method
        setattr(obj, attr, watched)
        self.undo.append(lambda: setattr(obj, attr, original) if own else delattr(obj, attr))

    def install(self):
        t, add = self.trainer, self.add
        master, scaler = t.master, t.scaler
        self.watch(t, "loss_fn", lambda out: add("loss", out.dtype))
        self.watch(scaler, "scale", self.on_scale)
        acc = lambda _: add("accumulate", torch.float32)  # noqa: E731
        self.watch(t, "_accumulate", acc, self.before_accumulate)
        self.watch(scaler, "unscale_", self.on_scaler("unscale"))
        self.watch(scaler, "update", self.on_scaler("update"))
        self.watch(t.schedule, "step", lambda _: add("schedule"))
        self.watch(master, "master_to_model", lambda _: add("cast_back", t.cfg.dtype))
        self.watch(master, "zero_grad", lambda _: add("zero"))
        # Trainer.step calls this module's clip_grad_norm_: watched for the duration of the step
        self.watch(sys.modules[__name__], "clip_grad_norm_", before=self.on_clip)
        self.hooks = [layer.register_forward_pre_hook(self.on_layer) for layer in t.model]
        step_hook = lambda *_: add("step", master.params[0].dtype)  # noqa: E731
        self.hooks.append(t.optimizer.register_step_post_hook(step_hook))

    def remove(self):
        for restore in reversed(self.undo):
            restore()
        for hook in self.hooks:
            hook.remove()
