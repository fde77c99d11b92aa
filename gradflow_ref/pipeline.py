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
    "STEP_PHASES",
    "PipelineConfig",
    "StepReport",
    "StepPhase",
    "warmup_cosine",
    "WarmupCosine",
    "Trainer",
    "trace_step",
]

# What trace_step records, in the order a correct step runs them:
STEP_PHASES = (
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

    def __post_init__(self) -> None:
        _check_pipeline_config(self, "PipelineConfig", "")  # at once, not at the first step


def _check_pipeline_config(cfg, func: str, prefix: str) -> None:
    # every field; `prefix` "cfg." names them as Trainer's argument (a config changed later)
    _checks.choice(func, f"{prefix}dtype", cfg.dtype, (torch.bfloat16, torch.float16))
    _checks.integer(func, f"{prefix}segments", cfg.segments, fix="1 means no checkpointing.")
    _checks.real(func, f"{prefix}max_norm", cfg.max_norm, low=0)
    _schedule_args(func, cfg.lr, cfg.warmup_steps, cfg.total_steps, cfg.min_lr, prefix)
    fix = "AdamW's (beta1, beta2), e.g. (0.9, 0.95)."
    _checks.pair(func, f"{prefix}betas", cfg.betas, fix)
    for k, beta in enumerate(cfg.betas):
        _checks.real(func, f"{prefix}betas[{k}]", beta, low=0, high=1, strict=False)
        if beta == 1:
            raise ValueError(f"{func}: `{prefix}betas[{k}]` must be below 1, got {beta}.")
    _checks.real(func, f"{prefix}eps", cfg.eps, low=0)
    _checks.real(func, f"{prefix}weight_decay", cfg.weight_decay, low=0, strict=False)
    _checks.real(func, f"{prefix}init_scale", cfg.init_scale, low=0)


@dataclass
class StepReport:
    loss: float  # mean FP32 loss over the step's micro-batches
    grad_norm: float  # global gradient norm before clipping (unscaled; inf or nan on FP16 overflow)
    lr: float  # learning rate this step used
    skipped: bool  # the scaler skipped the update (inf/NaN gradients)
    scale: float  # loss scale after this step's update (1.0 in BF16)

    def __post_init__(self) -> None:
        _checks.number("StepReport", "loss", self.loss)
        _checks.number("StepReport", "grad_norm", self.grad_norm)  # inf/NaN: an overflow
        _checks.real("StepReport", "lr", self.lr, low=0, strict=False)
        _checks.boolean("StepReport", "skipped", self.skipped)
        _checks.real("StepReport", "scale", self.scale, low=0)


@dataclass
class StepPhase:
    name: str  # one of STEP_PHASES
    micro_batch: int | None  # index of the micro-batch whose loop ran it; None: after the loop
    dtype: str | None  # dtype of the tensors it produced ("bfloat16", ...); None: no tensor
    count: int = 1  # layer forwards (forward, recompute); 1 for the other phases

    def __post_init__(self) -> None:
        _checks.choice("StepPhase", "name", self.name, STEP_PHASES)
        if self.micro_batch is not None:
            _checks.integer("StepPhase", "micro_batch", self.micro_batch, low=0)
        if self.dtype is not None:
            _checks.instance("StepPhase", "dtype", self.dtype, str)
        _checks.integer("StepPhase", "count", self.count)


def _schedule_args(func, lr, warmup_steps, total_steps, min_lr, prefix=""):
    # the learning-rate schedule's arguments, named as the caller's parameters (prefix "cfg.")
    lr = _checks.real(func, f"{prefix}lr", lr, low=0)
    min_lr = _checks.real(func, f"{prefix}min_lr", min_lr, low=0, strict=False)
    if min_lr > lr:
        raise ValueError(
            f"{func}: `{prefix}min_lr` ({min_lr}) must not exceed `{prefix}lr` ({lr}); the "
            "schedule decays from lr down to min_lr."
        )
    warmup_steps = _checks.integer(func, f"{prefix}warmup_steps", warmup_steps)
    fix = f"Warmup takes the first {warmup_steps} of them."
    _checks.integer(func, f"{prefix}total_steps", total_steps, low=warmup_steps + 1, fix=fix)
    return lr, min_lr


def warmup_cosine(step, lr, warmup_steps, total_steps, min_lr=0.0) -> float:
    """Return the learning rate after `step` optimizer steps: linear warmup, then cosine decay.

    lr * (step + 1) / warmup_steps while step < warmup_steps, then
    min_lr + (lr - min_lr) * (1 + cos(pi * t)) / 2 with t = (step - warmup_steps) /
    (total_steps - warmup_steps), held at min_lr once t >= 1.

    Raises:
        ValueError: `lr` not positive and finite, `min_lr` outside [0, lr], `warmup_steps` < 1,
            `total_steps` <= `warmup_steps`, or `step` < 0.
    """
    lr, min_lr = _schedule_args("warmup_cosine", lr, warmup_steps, total_steps, min_lr)
    _checks.integer("warmup_cosine", "step", step, low=0, fix="Pass optimizer steps taken so far.")
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
        self.base_lrs = [group["lr"] for group in optimizer.param_groups]
        for base in self.base_lrs:
            _schedule_args("WarmupCosine", base, warmup_steps, total_steps, min_lr)
        self.optimizer = optimizer
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
        _checks.instance(
            name, "model", model, nn.Sequential, "Its layers are checkpointed in segments."
        )
        devices = sorted({str(p.device) for p in model.parameters()})
        if len(devices) != 1:
            raise ValueError(
                f"{name}: all parameters must be on one device, got {devices or 'no parameters'}; "
                "move the model with model.to(device) first."
            )
        _check_pipeline_config(cfg, name, "cfg.")  # again: a field may have changed since
        if cfg.segments > len(model):
            raise ValueError(
                f"{name}: `cfg.segments` must be an int between 1 and the number of "
                f"layers ({len(model)}), got {cfg.segments!r}."
            )
        if loss_fn is not None:
            _checks.callable_(name, "loss_fn", loss_fn, "Pass loss(logits, targets) or None.")
        self.cfg, self.loss_fn = cfg, loss_fn or F.cross_entropy
        self._class_ids = loss_fn is None  # the default loss: integer targets are class ids
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

    def step(self, micro_batches: Sequence[tuple[torch.Tensor, torch.Tensor]]) -> StepReport:
        """Take one optimizer step over `micro_batches`, a list of (inputs, targets) pairs.

        A step that raises leaves the trainer as it was: no gradient of its micro-batches stays
        behind. In BF16 a step whose gradient norm is inf or NaN is skipped, as the scaler skips
        one in FP16, so the masters stay finite.

        Raises:
            TypeError: `micro_batches` is not a list or tuple of (inputs, targets) tensor pairs.
            ValueError: `micro_batches` is empty, or a micro-batch is empty, not finite, has the
                wrong width, not one target per input row, or class ids the model lacks.
        """
        self._check_batches(micro_batches, "Trainer.step")
        cfg, n = self.cfg, len(micro_batches)
        lr, loss_sum = self.optimizer.param_groups[0]["lr"], 0.0
        saved = [None if m.grad is None else m.grad.clone() for m in self.master.params]
        try:
            for i, (x, y) in enumerate(micro_batches):
                loss_sum += self._micro_batch(x, y, n, "Trainer.step", f"micro_batches[{i}][1]")
        except BaseException:  # leave no gradient of this step behind
            self.model.zero_grad(set_to_none=True)
            for m, grad in zip(self.master.params, saved):
                m.grad = grad
            raise
        self.scaler.unscale_(self.optimizer)  # FP16: divide by the scale, record inf/NaN
        norm = clip_grad_norm_(self.master.params, cfg.max_norm)  # once, on true gradients
        if self.scaler.is_enabled():
            skipped_before = self.scaler.skipped_steps
            self.scaler.step(self.optimizer)  # AdamW on the FP32 masters, unless inf/NaN
            skipped = self.scaler.skipped_steps > skipped_before
        else:
            skipped = not math.isfinite(norm)
            if not skipped:
                self.optimizer.step()  # AdamW on the FP32 masters
        self.scaler.update()
        if not skipped:
            self.schedule.step()
        self.master.master_to_model()  # cast back: FP32 masters -> model dtype
        self.master.zero_grad()
        return StepReport(loss_sum, float(norm), lr, skipped, self.scaler.get_scale())

    def accumulate(self, inputs: torch.Tensor, targets: torch.Tensor, n_micro: int = 1) -> float:
        """Run one micro-batch forward and backward; add its gradients into the FP32 masters.

        The loss is divided by `n_micro` (the step's micro-batches), so the sum over the step is
        the gradient of the mean loss; FP16 scales it first. `step` calls this once per
        micro-batch; called alone, it lets a reader rearrange the rest of the step.

        Returns:
            This micro-batch's share of the step's loss, loss / n_micro.
        """
        func = "Trainer.accumulate"
        self._check_batches([(inputs, targets)], func, ("inputs", "targets"))
        _checks.count(func, "n_micro", n_micro, fix="Pass the step's number of micro-batches.")
        return self._micro_batch(inputs, targets, n_micro, func, "targets")

    def _micro_batch(self, x, y, n_micro, func, targets_name) -> float:
        x = x.to(self.device, self.cfg.dtype) if x.is_floating_point() else x.to(self.device)
        logits = checkpoint_sequential(self.model, self.cfg.segments, x)  # cfg.dtype
        y = y.to(self.device)
        if self._class_ids and not y.is_floating_point():
            classes = logits.shape[-1]
            if y.numel() and (int(y.min()) < 0 or int(y.max()) >= classes):
                raise ValueError(
                    f"{func}: `{targets_name}` holds class ids from {int(y.min())} to "
                    f"{int(y.max())}, but the model outputs {classes} classes (ids 0 to "
                    f"{classes - 1}); check the labels against the model's last layer."
                )
        loss = self.loss_fn(logits.float(), y)
        if not (isinstance(loss, torch.Tensor) and loss.dim() == 0 and loss.is_floating_point()):
            got = type(loss).__name__
            got += f" of shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else ""
            raise TypeError(
                f"{func}: `loss_fn` must return a scalar floating-point tensor (the mean loss), "
                f"got {got}; reduce it, e.g. F.cross_entropy(logits, y) or loss.mean()."
            )
        loss = loss / n_micro  # FP32 loss
        self.scaler.scale(loss).backward()  # FP16: times the loss scale
        self._accumulate()
        return loss.item()

    def _check_batches(self, micro_batches, func, names=None) -> None:
        # names: what the error calls a pair's inputs and targets; micro_batches[i][0/1] by default
        _checks.instance(func, "micro_batches", micro_batches, (list, tuple))
        if len(micro_batches) == 0:
            raise ValueError(
                f"{func}: `micro_batches` must hold at least one (inputs, targets) pair, got none."
            )
        for i, pair in enumerate(micro_batches):
            _checks.pair(func, f"micro_batches[{i}]", pair, "Pass (inputs, targets).")
            x_name, y_name = names or (f"micro_batches[{i}][0]", f"micro_batches[{i}][1]")
            x = _checks.model_input(func, x_name, self.model, pair[0])
            if x.is_floating_point():
                _checks.tensor(func, x_name, x, finite=True)
            elif isinstance(self.model[0], nn.Linear):
                raise TypeError(
                    f"{func}: `{x_name}` must be a floating-point tensor for a "
                    f"model that starts with nn.Linear, got dtype {x.dtype}; use x.float()."
                )
            y = _checks.instance(func, y_name, pair[1], torch.Tensor)
            if y.dim() == 0 or len(y) != len(x):
                raise ValueError(
                    f"{func}: `{y_name}` must hold one target per input row of `{x_name}`, "
                    f"got {len(x)} rows and targets of shape {tuple(y.shape)}."
                )

    @torch.no_grad()
    def _accumulate(self):
        for p, m in zip(self.model.parameters(), self.master.params):
            if p.grad is not None:
                g = p.grad.float()
                m.grad = g if m.grad is None else m.grad.add_(g)
                p.grad = None


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def trace_step(trainer: Trainer, micro_batches) -> tuple[StepReport, list[StepPhase]]:
    """Run `trainer.step(micro_batches)` and record every phase as it runs, in order.

    The trainer's parts (loss function, scaler, optimizer, schedule, master weights, layers) are
    observed through hooks and wrappers that are removed afterwards, so the step computes
    exactly what an untraced step computes. A stage that does nothing (the scaler's, in BF16) or
    did not happen (an optimizer step the scaler skipped) is not recorded.

    Returns:
        The step's StepReport and its StepPhase list, in execution order.

    Example:
        >>> x, y = torch.randn(3, 4), torch.tensor([0, 1, 1])
        >>> _, stages = trace_step(Trainer(nn.Sequential(nn.Linear(4, 2))), [(x, y)])
        >>> " ".join(s.name for s in stages)
        'forward loss backward accumulate clip step schedule cast_back zero'
    """
    _checks.instance("trace_step", "trainer", trainer, Trainer, "Pass Trainer(model, cfg).")
    trainer._check_batches(micro_batches, "trace_step")
    tracer = _Tracer(trainer)
    tracer.install()
    try:
        report = trainer.step(_Loop(tracer, micro_batches))
    finally:
        tracer.remove()
    return report, tracer.stages


class _Loop(list):
    """The step's `for x, y in micro_batches`, seen from inside: tells the tracer the index."""

    def __init__(self, tracer: "_Tracer", micro_batches):
        super().__init__(micro_batches)
        self.tracer = tracer

    def __iter__(self):
        for i, batch in enumerate(super().__iter__()):
            self.tracer.micro = i
            yield batch
        self.tracer.micro = None


class _Tracer:
    """Records a Trainer's step as StepPhases through hooks and wrappers that remove() undoes."""

    def __init__(self, trainer: Trainer):
        self.trainer, self.stages = trainer, []
        self.micro: int | None = None  # index of the micro-batch running; None after the loop
        self.backward = False  # inside autograd's backward (layer forwards are recomputes)
        self.undo: list[Callable[[], None]] = []
        self.hooks: list = []

    def add(self, name, dtype=None):
        self.stages.append(StepPhase(name, self.micro, dtype and _name(dtype)))

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
