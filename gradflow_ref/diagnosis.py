"""Diagnosis: log, at every step, the signals that say how a training run is going.

Taught in docs/diagnosis.md. `Monitor` hangs hooks on a model and records, per optimizer step,
the loss, the global and per-layer gradient norms, whether clipping acted, the loss scale and
whether the step was skipped (FP16 with torch.amp.GradScaler), each layer's update-to-weight
ratio, and the first module whose forward produced a non-finite value.
"""

import math
from dataclasses import dataclass, field

import torch
from torch import nn

from gradflow_ref import _checks

__all__ = ["StepRecord", "Monitor"]


@dataclass
class StepRecord:
    step: int  # optimizer steps recorded before this one
    loss: float  # the loss passed to Monitor.grads
    grad_norm: float  # global 2-norm of every gradient, before clipping
    layer_norms: dict[str, float]  # module name -> 2-norm of its parameters' gradients
    clipped: bool  # grad_norm exceeded max_norm (clip_grad_norm_ scaled the gradients)
    loss_scale: float  # the GradScaler's scale during backward (1.0 without one)
    skipped: bool  # the optimizer did not change the weights (GradScaler found inf/NaN)
    update_ratio: dict[str, float] = field(
        default_factory=dict
    )  # ||w_after - w_before|| / ||w_before||
    nonfinite_forward: str | None = None  # first module, in forward order, to output inf/NaN
    nonfinite_grad: str | None = None  # first layer, in backward order, to get an inf/NaN gradient

    def __post_init__(self) -> None:
        _checks.count("StepRecord", "step", self.step, low=0)
        _checks.number("StepRecord", "loss", self.loss)  # inf or NaN: what a monitor records
        _checks.number("StepRecord", "grad_norm", self.grad_norm)
        _checks.number("StepRecord", "loss_scale", self.loss_scale)
        if not self.loss_scale > 0:
            raise ValueError(f"StepRecord: `loss_scale` must be positive, got {self.loss_scale!r}.")
        _checks.boolean("StepRecord", "clipped", self.clipped)
        _checks.boolean("StepRecord", "skipped", self.skipped)
        for name in ("layer_norms", "update_ratio"):
            norms = _checks.instance("StepRecord", name, getattr(self, name), dict)
            for key, value in norms.items():
                _checks.instance("StepRecord", f"{name} key", key, str, "Module names.")
                _checks.number("StepRecord", f"{name}[{key!r}]", value)
        for name in ("nonfinite_forward", "nonfinite_grad"):
            if getattr(self, name) is not None:
                _checks.instance("StepRecord", name, getattr(self, name), str, "A name or None.")


class Monitor:
    """Record one StepRecord per optimizer step of `model`, from hooks and two calls per step.

    Call `grads(loss)` after `backward()` (and `scaler.unscale_(opt)` with FP16), before clipping
    and `optimizer.step()`; call `step()` right after `optimizer.step()` (and `scaler.update()`).
    States: READY (waiting for grads), GRADS (waiting for step) and REMOVED (hooks gone, after
    remove()); calls in another order raise, and a call that raises changes nothing.

    Args:
        model: the module whose parameters the optimizer updates.
        max_norm: the clipping threshold used in the loop, to count clipped steps (None: none).
        scaler: the torch.amp.GradScaler of an FP16 loop, to read the loss scale (None: none).

    Example:
        >>> model = nn.Linear(4, 2)
        >>> opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        >>> mon = Monitor(model, max_norm=1.0)
        >>> loss = model(torch.ones(3, 4)).square().mean()
        >>> loss.backward()
        >>> mon.grads(loss)
        >>> norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        >>> opt.step()
        >>> record = mon.step()
        >>> math.isclose(record.grad_norm, norm.item(), rel_tol=1e-6)
        True
    """

    READY, GRADS, REMOVED = "READY", "GRADS", "REMOVED"

    def __init__(self, model: nn.Module, max_norm: float | None = None, scaler=None):
        _checks.instance("Monitor", "model", model, nn.Module)
        if max_norm is not None:
            max_norm = _checks.real("Monitor", "max_norm", max_norm, low=0.0)
        if scaler is not None and not isinstance(scaler, torch.amp.GradScaler):
            raise TypeError(
                f"Monitor: `scaler` must be a torch.amp.GradScaler or None, got "
                f"{type(scaler).__name__}; pass the scaler the loop calls scale() on."
            )
        self.max_norm, self.scaler, self.state = max_norm, scaler, self.READY
        self.records: list[StepRecord] = []
        # layer = a module that owns parameters directly, named as in model.named_modules()
        self.layers = {
            name: list(m.parameters(recurse=False))
            for name, m in model.named_modules()
            if any(True for _ in m.parameters(recurse=False))
        }
        self._grad_sq: dict[tuple[str, int], float] = {}  # (layer, index) -> squared grad norm
        self._nonfinite: str | None = None
        self._nonfinite_grad: str | None = None
        self._handles = []
        for name, params in self.layers.items():
            for i, p in enumerate(params):
                if p.requires_grad:
                    hook = self._on_grad(name, i)
                    self._handles.append(p.register_post_accumulate_grad_hook(hook))
        for name, m in model.named_modules():
            self._handles.append(m.register_forward_hook(self._on_forward(name or "model")))

    def _on_grad(self, name: str, i: int):
        def hook(p: torch.Tensor) -> None:  # after p.grad is accumulated, once per backward
            sq = float(p.grad.detach().float().square().sum())  # the accumulated gradient's
            self._grad_sq[(name, i)] = sq
            if not math.isfinite(sq) and self._nonfinite_grad is None:
                self._nonfinite_grad = name

        return hook

    def _on_forward(self, name: str):
        def hook(module, args, out) -> None:
            if (
                self._nonfinite is None
                and isinstance(out, torch.Tensor)
                and out.is_floating_point()
            ):
                if not bool(torch.isfinite(out).all()):
                    self._nonfinite = name

        return hook

    def grads(self, loss: torch.Tensor, scale: float | None = None) -> None:
        """Read the loss and the gradients of this step (after backward, before clipping).

        Args:
            loss: this step's loss, unscaled.
            scale: the factor backward's loss was multiplied by, without a GradScaler (a fixed
                loss scale); None reads it from the Monitor's scaler, or 1.0 without one.

        Raises:
            TypeError / ValueError: `loss` not a one-element tensor, `scale` not positive.
            RuntimeError: grads() was already called since the last step(), no gradient
                arrived since, or the monitor was removed.
        """
        _removed(self, "grads")
        if self.state != self.READY:
            raise RuntimeError(
                "Monitor.grads: already called since the last step(); call step() after "
                "optimizer.step() first."
            )
        _checks.instance("Monitor.grads", "loss", loss, torch.Tensor)
        if loss.numel() != 1:
            raise ValueError(
                f"Monitor.grads: `loss` must be the step's one loss value, got a tensor of shape "
                f"{tuple(loss.shape)}; pass the mean loss that backward() ran on."
            )
        if scale is not None:
            scale = _checks.real("Monitor.grads", "scale", scale, low=0.0)
        if not self._grad_sq:
            raise RuntimeError(
                "Monitor.grads: no gradient arrived since the last step(); call "
                "loss.backward() before grads(loss)."
            )
        self._loss = float(loss.detach())
        # the hooks ran during backward, on scaler.scale(loss)'s gradients: divide the scale out
        if scale is not None:
            self._scale = scale
        elif self.scaler is not None:
            self._scale = float(self.scaler.get_scale())
        else:
            self._scale = 1.0
        sq = dict.fromkeys(self.layers, 0.0)
        for (name, _), s in self._grad_sq.items():
            sq[name] += s / self._scale**2
        self._layer_norms = {n: math.sqrt(s) for n, s in sq.items()}
        self._grad_norm = math.sqrt(sum(sq.values()))
        self._before = {n: [p.detach().clone() for p in ps] for n, ps in self.layers.items()}
        self.state = self.GRADS

    def step(self) -> StepRecord:
        """Compare the weights with those seen by grads(), append and return this step's record.

        Raises:
            RuntimeError: grads() has not been called since the last step(), or the monitor
                was removed.
        """
        _removed(self, "step")
        if self.state != self.GRADS:
            raise RuntimeError(
                "Monitor.step: no gradients recorded for this step; call grads(loss) after "
                "backward() and before optimizer.step()."
            )
        ratios = {}
        for name, before in self._before.items():
            moved = math.sqrt(
                sum(
                    float((p.detach() - b).float().square().sum())
                    for p, b in zip(self.layers[name], before)
                )
            )
            size = math.sqrt(sum(float(b.float().square().sum()) for b in before))
            ratios[name] = moved / size if size > 0 else math.inf
        record = StepRecord(
            step=len(self.records),
            loss=self._loss,
            grad_norm=self._grad_norm,
            layer_norms=self._layer_norms,
            clipped=self.max_norm is not None and self._grad_norm > self.max_norm,
            loss_scale=self._scale,
            skipped=all(r == 0.0 for r in ratios.values()),
            update_ratio=ratios,
            nonfinite_forward=self._nonfinite,
            nonfinite_grad=self._nonfinite_grad,
        )
        self.records.append(record)
        self._nonfinite, self._nonfinite_grad, self._grad_sq, self._before = None, None, {}, {}
        self.state = self.READY
        return record

    def remove(self) -> None:
        """Remove the hooks from the model; the monitor records nothing after this."""
        for h in self._handles:
            h.remove()
        self._handles, self.state = [], self.REMOVED


def _removed(monitor: Monitor, method: str) -> None:
    if monitor.state == Monitor.REMOVED:
        raise RuntimeError(
            f"Monitor.{method}: the monitor was removed (remove() took its hooks off the model), "
            "so it sees no gradient; make a new Monitor(model) to record again."
        )
