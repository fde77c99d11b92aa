"""Loss scaling: multiply the loss so small FP16 gradients do not underflow, then divide back.

Taught by docs/loss_scaling.md (Chapter 5). `GradScaler` follows torch.amp.GradScaler's
constructor, methods, state dict and update rule (dynamic scaling: back off on inf/NaN, grow
after `growth_interval` clean steps); `StaticScaler` keeps one scale and only skips
(Micikevicius et al. 2018, "Mixed Precision Training").
"""

from __future__ import annotations

import math
from enum import Enum

import torch

from gradflow_ref import _checks

__all__ = ["OptState", "GradScaler", "StaticScaler"]


class OptState(Enum):
    READY = 0  # gradients still scaled (or none yet) since the last update()
    UNSCALED = 1  # unscale_() divided them and recorded whether any was inf/NaN
    STEPPED = 2  # step() ran (or skipped) the optimizer; update() comes next


_FLOAT32_MAX = torch.finfo(torch.float32).max  # the scale is a float32 tensor, as in torch


def _positive(func: str, name: str, value, lo: float = 0.0, hi: float = math.inf) -> float:
    fix = (
        "A scale must stay a finite float32."
        if name in ("init_scale", "scale", "new_scale")
        else ""
    )
    value = _checks.bounded(func, name, value, lo, None if math.isinf(hi) else hi, fix)
    if fix and value > _FLOAT32_MAX:
        raise ValueError(
            f"{func}: `{name}` must be at most {_FLOAT32_MAX:.4g} (float32's largest), got "
            f"{value!r}; as a float32 scale it would be inf. Try 2.0**16."
        )
    return value


def _interval(func: str, value, name: str = "growth_interval") -> int:
    return _checks.count(func, name, value, fix="Count clean steps, e.g. 2000.")


def _flags(func: str, device, enabled) -> None:
    _checks.instance(func, "device", device, str, "Pass a device type such as 'cpu' or 'cuda'.")
    try:
        torch.device(device)
    except RuntimeError:
        raise ValueError(
            f"{func}: `device` must be a device type such as 'cpu' or 'cuda', got {device!r}."
        ) from None
    _checks.boolean(func, "enabled", enabled, "Pass False to turn scaling off.")


def _optimizer(func: str, optimizer) -> None:
    _checks.instance(
        func, "optimizer", optimizer, torch.optim.Optimizer, "Pass the torch optimizer."
    )


class GradScaler:
    """Scale the loss, unscale and check the gradients, skip bad steps, adapt the scale.

    Same constructor, methods and state dict as torch.amp.GradScaler, whose `device` default is
    "cuda"; here it is "cpu", the package's default device (and torch's CPU GradScaler is what
    the tests compare against). `device` is informational: the scale lives on the device of the
    first tensor passed to scale(), as in torch.

    Args:
        device: device type of the tensors being scaled ("cpu", "cuda").
        init_scale: first scale factor, finite and > 0.
        growth_factor: scale multiplier after `growth_interval` clean steps, finite and > 1.
        backoff_factor: scale multiplier after a step with inf/NaN gradients, in (0, 1).
        growth_interval: consecutive clean steps before the scale grows, >= 1.
        enabled: False makes every method a pass-through (step() just steps).

    Raises:
        ValueError / TypeError: a factor or interval out of range or of the wrong type.

    Example:
        >>> model = torch.nn.Linear(2, 1)
        >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        >>> scaler = GradScaler(init_scale=1024.0)
        >>> loss = model(torch.ones(1, 2)).pow(2).sum()
        >>> scaler.scale(loss).backward()
        >>> scaler.unscale_(optimizer)  # optional: to clip true gradients
        >>> scaler.step(optimizer)  # skipped if any gradient is inf/NaN
        >>> scaler.update()
        >>> scaler.get_scale(), scaler.skipped_steps
        (1024.0, 0)
    """

    def __init__(
        self,
        device: str = "cpu",
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        name = type(self).__name__
        _flags(name, device, enabled)
        self._device = device
        self._enabled = bool(enabled)
        self._init_scale = _positive(name, "init_scale", init_scale)
        self._growth_factor = _positive(name, "growth_factor", growth_factor, lo=1.0)
        self._backoff_factor = _positive(name, "backoff_factor", backoff_factor, hi=1.0)
        self._growth_interval = _interval(name, growth_interval)
        self._scale: torch.Tensor | None = None  # float32 0-dim, created by the first scale()
        self._growth_tracker = 0  # consecutive clean steps since the last change
        self._scaled = False  # scale() called since the last update()
        self._states: dict[int, dict] = {}  # id(optimizer) -> {"stage", "found_inf"}
        self.skipped_steps = 0  # optimizer steps skipped for inf/NaN gradients (not in torch)

    def _state(self, optimizer) -> dict:
        return self._states.setdefault(id(optimizer), {"stage": OptState.READY, "found_inf": None})

    def _require_scaled(self, func: str) -> None:
        if not self._scaled:
            raise RuntimeError(
                f"{type(self).__name__}.{func}: scale() has not been called since the last "
                "update(); call scaler.scale(loss).backward() first."
            )

    def scale(self, outputs):
        """Return `outputs` (a tensor, or a list/tuple of tensors) times the current scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        if not isinstance(outputs, torch.Tensor):
            raise TypeError(
                f"{type(self).__name__}.scale: `outputs` must be a tensor or a list/tuple of "
                f"tensors, got {type(outputs).__name__}."
            )
        if self._scale is None:
            self._scale = torch.full(
                (), self._init_scale, dtype=torch.float32, device=outputs.device
            )
        self._scaled = True
        return outputs * self._scale.to(outputs.device)

    def unscale_(self, optimizer: torch.optim.Optimizer) -> None:
        """Divide the optimizer's gradients by the scale in place and record any inf/NaN.

        Raises:
            RuntimeError: called twice, or after step(), since the last update().
            ValueError: a gradient is float16 (torch refuses these too).
        """
        if not self._enabled:
            return
        name = type(self).__name__
        _optimizer(f"{name}.unscale_", optimizer)
        self._require_scaled("unscale_")
        state = self._state(optimizer)
        if state["stage"] is not OptState.READY:
            raise RuntimeError(
                f"{name}.unscale_: already called since the last update()"
                f"{' (step() ran)' if state['stage'] is OptState.STEPPED else ''}; "
                "call update() first."
            )
        # Reciprocal in float64, then float32: as torch, so unscaled gradients match bit for bit.
        inv_scale = self._scale.double().reciprocal().float()
        found_inf = None  # stays None when no parameter has a gradient, as torch records none
        with torch.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if found_inf is None:
                        found_inf = torch.zeros((), device=self._scale.device)
                    if p.grad.dtype == torch.float16:
                        raise ValueError(
                            f"{name}.unscale_: gradients must not be float16 (unscaling in FP16 "
                            "underflows again); keep FP32 parameters (torch.autocast) or FP32 "
                            "master weights (MasterWeights.grads_to_master)."
                        )
                    bad = (~torch.isfinite(p.grad)).any().to(found_inf.device, torch.float32)
                    found_inf = torch.maximum(found_inf, bad)
                    p.grad.mul_(inv_scale.to(p.grad.device))
        state["found_inf"] = found_inf
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer: torch.optim.Optimizer, *args, **kwargs):
        """Unscale (unless done), then call `optimizer.step(*args, **kwargs)` if all finite.

        Returns:
            optimizer.step()'s return value, or None when the step was skipped.

        Raises:
            RuntimeError: no scale() since the last update(), step() already called, no
                parameter of `optimizer` has a gradient, or a `closure` keyword argument (not
                supported, as in torch).
        """
        name = type(self).__name__
        _optimizer(f"{name}.step", optimizer)
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError(f"{name}.step: closures are not supported; call step() plainly.")
        self._require_scaled("step")
        state = self._state(optimizer)
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError(
                f"{name}.step: already called since the last update(); call update() first."
            )
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if state["found_inf"] is None:
            # torch: AssertionError("No inf checks were recorded for this optimizer.")
            raise RuntimeError(
                f"{name}.step: No inf checks were recorded for this optimizer: none of its "
                "parameters has a gradient; call scaler.scale(loss).backward() on a loss that "
                "depends on the optimizer's parameters before step()."
            )
        retval = None
        if state["found_inf"].item():
            self.skipped_steps += 1
        else:
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale: float | torch.Tensor | None = None) -> None:
        """Back off after a skipped step, grow after `growth_interval` clean ones, or set one.

        Args:
            new_scale: if given (float or one-element tensor), the new scale, finite and > 0.

        Raises:
            RuntimeError: no step() (or unscale_()) since the last update().
        """
        if not self._enabled:
            return
        name = type(self).__name__
        self._require_scaled("update")
        if new_scale is not None:
            if isinstance(new_scale, torch.Tensor) and new_scale.numel() != 1:
                raise ValueError(
                    f"{name}.update: `new_scale` must be a float or a one-element tensor, got a "
                    f"tensor of shape {tuple(new_scale.shape)}."
                )
            value = new_scale.item() if isinstance(new_scale, torch.Tensor) else new_scale
            self._scale.fill_(_positive(f"{name}.update", "new_scale", value))
        else:
            found = [s["found_inf"] for s in self._states.values() if s["found_inf"] is not None]
            if not found:
                raise RuntimeError(
                    f"{name}.update: no gradients were checked since the last update() (no "
                    "inf checks were recorded prior to update); call step(optimizer) first."
                )
            self._update_scale(any(bool(f.item()) for f in found))
        self._states.clear()
        self._scaled = False

    def _update_scale(self, found_inf: bool) -> None:
        # torch._amp_update_scale_: products are rounded to float32, growth to inf is refused.
        if found_inf:
            self._scale.fill_(self._scale.item() * self._backoff_factor)
            self._growth_tracker = 0
            return
        self._growth_tracker += 1
        if self._growth_tracker == self._growth_interval:
            grown = torch.tensor(self._scale.item() * self._growth_factor, dtype=torch.float32)
            if torch.isfinite(grown):
                self._scale.fill_(grown.item())
            self._growth_tracker = 0

    def get_scale(self) -> float:
        """Return the current scale (init_scale before the first scale(); 1.0 when disabled)."""
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale.item()

    def get_growth_factor(self) -> float:
        """Return the factor the scale grows by after `growth_interval` clean steps."""
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        """Set the growth factor (finite and > 1); the next growth uses it."""
        self._growth_factor = _positive(
            f"{type(self).__name__}.set_growth_factor", "new_factor", new_factor, lo=1.0
        )

    def get_backoff_factor(self) -> float:
        """Return the factor the scale shrinks by after a step with inf/NaN gradients."""
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        """Set the backoff factor (in (0, 1)); the next backoff uses it."""
        self._backoff_factor = _positive(
            f"{type(self).__name__}.set_backoff_factor", "new_factor", new_factor, hi=1.0
        )

    def get_growth_interval(self) -> int:
        """Return how many consecutive clean steps make the scale grow."""
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        """Set the growth interval (an int >= 1); the current count of clean steps is kept."""
        func = f"{type(self).__name__}.set_growth_interval"
        self._growth_interval = _interval(func, new_interval, "new_interval")

    def is_enabled(self) -> bool:
        """Return whether scaling is enabled."""
        return self._enabled

    _KEYS = ("scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker")

    def state_dict(self) -> dict:
        """Return torch's five entries (empty when disabled), loadable by either class."""
        if not self._enabled:
            return {}
        return {
            "scale": self.get_scale(),
            "growth_factor": self._growth_factor,
            "backoff_factor": self._backoff_factor,
            "growth_interval": self._growth_interval,
            "_growth_tracker": self._growth_tracker,
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a state_dict() from this class or torch's, after checking every entry.

        Raises:
            TypeError: not a dict, or an entry of the wrong type.
            ValueError: missing or unknown keys (an empty dict comes from a disabled scaler),
                or a value out of range.
        """
        if not self._enabled:
            return
        d = self._check_state_dict(state_dict)
        self._init_scale = d["scale"]
        if self._scale is not None:
            self._scale.fill_(d["scale"])
        if "growth_factor" in d:
            self._growth_factor, self._backoff_factor = d["growth_factor"], d["backoff_factor"]
            self._growth_interval, self._growth_tracker = d["growth_interval"], d["_growth_tracker"]

    def _check_state_dict(self, state_dict) -> dict:
        func = f"{type(self).__name__}.load_state_dict"
        if not isinstance(state_dict, dict):
            raise TypeError(
                f"{func}: `state_dict` must be a dict, got {type(state_dict).__name__}."
            )
        missing = [k for k in self._KEYS if k not in state_dict]
        extra = [k for k in state_dict if k not in self._KEYS]
        if missing or extra:
            raise ValueError(
                f"{func}: `state_dict` must have exactly the keys {', '.join(self._KEYS)}; "
                f"missing {missing}, unknown {extra}. Pass what state_dict() returned (an empty "
                "dict comes from a disabled scaler)."
            )
        d = {"scale": _positive(func, "scale", state_dict["scale"])}
        if "growth_factor" in self._KEYS:
            d["growth_factor"] = _positive(
                func, "growth_factor", state_dict["growth_factor"], lo=1.0
            )
            d["backoff_factor"] = _positive(
                func, "backoff_factor", state_dict["backoff_factor"], hi=1.0
            )
            d["growth_interval"] = _interval(func, state_dict["growth_interval"])
            tracker = state_dict["_growth_tracker"]
            if isinstance(tracker, bool) or not isinstance(tracker, int) or tracker < 0:
                raise ValueError(f"{func}: `_growth_tracker` must be an int >= 0, got {tracker!r}.")
            d["_growth_tracker"] = tracker
        return d


class StaticScaler(GradScaler):
    """A constant loss scale: skip the step when a gradient is inf/NaN, never change the scale.

    Args:
        scale: the loss scale, finite and > 0 (a power of two keeps unscaling exact).
        device: as GradScaler's.
        enabled: False makes every method a pass-through.
    """

    _KEYS = ("scale",)

    def __init__(self, scale: float = 2.0**10, device: str = "cpu", enabled: bool = True) -> None:
        scale = _positive("StaticScaler", "scale", scale)
        _flags("StaticScaler", device, enabled)
        super().__init__(device=device, init_scale=scale, enabled=enabled)

    def _update_scale(self, found_inf: bool) -> None:
        pass

    def state_dict(self) -> dict:
        """Return {"scale": ...} (empty when disabled)."""
        return {"scale": self.get_scale()} if self._enabled else {}
