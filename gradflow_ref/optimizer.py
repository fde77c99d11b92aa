"""Numerics inside the optimizer: keeping small updates when the weights themselves are BF16.

Taught in docs/optimizer.md (Chapter 9). A BF16 weight keeps 8 significant bits, so an update
below half its spacing rounds away. Three remedies short of an FP32 master copy: stochastic
rounding (round up with probability equal to the remainder's share of the spacing) and Kahan
summation (carry the rounding error into the next step), both studied for BF16 training by
Zamirai et al. 2020 (arXiv:2010.06192); and AdamW's moments kept in BF16 (DeepSeek-V3,
arXiv:2412.19437).
"""

from __future__ import annotations

import math

import torch

from gradflow_ref import _checks

__all__ = ["METHODS", "stochastic_round", "kahan_add_", "add_", "trajectory", "AdamW"]

# how an FP32 result is written into a BF16 weight
METHODS = ("nearest", "stochastic", "kahan", "master")
_MAX_STEPS = 10**6  # trajectory's longest: one Python-level addition per step
_MAX_COPIES = 2**20  # trajectory's most copies of the weight
_SEED = "torch.Generator.manual_seed takes 0 to 2**63 - 1."


def stochastic_round(x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """Round FP32 `x` to BF16 up or down at random, so that the result is `x` in expectation.

    BF16 is the top 16 bits of FP32. Adding a uniform random integer in [0, 2**16) to the bits
    and cutting the low 16 bits off rounds the magnitude up with probability (remainder / spacing).

    Args:
        x: an FP32 tensor (inf and NaN pass through unchanged).
        generator: the CPU generator that draws the random bits (seed it for a repeatable run).

    Returns:
        A BF16 tensor of `x`'s shape, each element one of the two BF16 neighbours of `x`.

    Example:
        >>> w = stochastic_round(torch.full((4,), 1.0 + 1e-3))  # 1.0 or 1.0078125
    """
    _checks.tensor("stochastic_round", "x", x)
    if x.dtype != torch.float32:
        raise TypeError(
            f"stochastic_round: `x` must be a float32 tensor, got {x.dtype}; cast it with .float()."
        )
    if generator is not None:
        _checks.instance("stochastic_round", "generator", generator, torch.Generator)
    return _stochastic_round(x, generator)


def _stochastic_round(x: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    bits = x.view(torch.int32)
    noise = torch.randint(0, 1 << 16, x.shape, generator=generator, dtype=torch.int32)
    rounded = ((bits + noise.to(x.device)) & -65536).view(torch.float32)  # -65536 = 0xFFFF0000
    return torch.where(torch.isfinite(x), rounded, x).to(torch.bfloat16)


@torch.no_grad()
def kahan_add_(weight: torch.Tensor, comp: torch.Tensor, update: torch.Tensor) -> torch.Tensor:
    """Add `update` to BF16 `weight` in place, carrying what rounding lost in `comp` (in place).

    The sum is formed in FP32 with the error of earlier steps added back; `comp` keeps the part
    that did not fit into `weight` (Kahan 1965), so many small updates add up as in FP32.

    Args:
        weight: the BF16 tensor to update.
        comp: the compensation buffer, same shape, BF16 (starts at zero).
        update: the FP32 (or any float) tensor to add, same shape.

    Returns:
        `weight`.
    """
    for name, t in (("weight", weight), ("comp", comp)):
        _checks.tensor("kahan_add_", name, t)
        if t.dtype != torch.bfloat16:
            raise TypeError(
                f"kahan_add_: `{name}` must be a bfloat16 tensor, got {t.dtype}; "
                "FP32 weights need no compensation."
            )
    _checks.tensor("kahan_add_", "update", update, floating=True)
    _checks.same_shape("kahan_add_", "comp", comp, "weight", weight)
    _checks.same_shape("kahan_add_", "update", update, "weight", weight)
    return _kahan_add(weight, comp, update)


def _kahan_add(weight, comp, update):
    w = weight.float()
    y = update.float() + comp.float()
    new = (w + y).to(torch.bfloat16)
    # new - w is exact in FP32 (8-bit significands) unless one is over 2**16 times the other;
    # then the update dwarfs the weight, and FP32's own rounding of y is the larger error
    comp.copy_(y - (new.float() - w))
    weight.copy_(new)
    return weight


@torch.no_grad()
def add_(
    weight: torch.Tensor,
    update: torch.Tensor,
    method: str,
    state: dict,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Add `update` to BF16 `weight` in place, rounding the sum with `method` (one of METHODS).

    "nearest" rounds to the nearest BF16 value (what `weight += update` does); "stochastic"
    rounds at random (`stochastic_round`); "kahan" carries the rounding error in
    `state["comp"]`; "master" adds to an FP32 copy in `state["master"]` and rounds that.

    Args:
        weight: BF16 tensor.
        update: float tensor of the same shape.
        method: one of METHODS.
        state: a dict that keeps this weight's buffers between calls (start with {}).
        generator: for "stochastic".

    Returns:
        `weight`.

    Raises:
        TypeError: `weight` not BF16, `update` not a float tensor, `generator` not one.
        ValueError: an unknown `method`, shapes that differ, or `state` of another weight.
    """
    _checks.choice("add_", "method", method, METHODS)
    _checks.instance("add_", "state", state, dict)
    _checks.tensor("add_", "weight", weight, floating=True)
    if weight.dtype != torch.bfloat16:
        raise TypeError(
            f"add_: `weight` must be a bfloat16 tensor, got {weight.dtype}; an FP32 weight "
            "keeps small updates without help: add them with weight.add_(update)."
        )
    _checks.tensor("add_", "update", update, floating=True)
    _checks.same_shape("add_", "update", update, "weight", weight)
    if generator is not None:
        _checks.instance("add_", "generator", generator, torch.Generator, "Or None.")
    for key in ("comp", "master"):  # buffers of an earlier call: they must be this weight's
        if key in state and (
            not isinstance(state[key], torch.Tensor) or state[key].shape != weight.shape
        ):
            raise ValueError(
                f"add_: `state` holds a {key!r} buffer that is not of `weight`'s shape "
                f"{tuple(weight.shape)}; pass each weight its own state dict (start with {{}})."
            )
    return _add(weight, update, method, state, generator)


def _add(weight, update, method, state, generator):
    """`add_` without the checks, for the loops of `trajectory` and `AdamW.step`."""
    if method == "kahan":
        if "comp" not in state:
            state["comp"] = torch.zeros_like(weight)
        return _kahan_add(weight, state["comp"], update)
    if method == "master":
        if "master" not in state:
            state["master"] = weight.to(torch.float32, copy=True)
        return weight.copy_(state["master"].add_(update.float()))
    total = weight.float() + update.float()
    new = _stochastic_round(total, generator) if method == "stochastic" else total
    return weight.copy_(new)


def trajectory(
    start: float, update: float, steps: int, method: str, copies: int = 1, seed: int = 0
) -> torch.Tensor:
    """Return a BF16 weight's value after each of `steps` additions of `update`, from `start`.

    Args:
        start: the weight's first value (rounded to nearest BF16).
        update: added at every step (computed in FP32).
        steps: number of additions.
        method: one of METHODS.
        copies: independent copies of the weight (they differ only under "stochastic").
        seed: seeds the random bits of "stochastic".

    Returns:
        A float32 tensor of shape (steps + 1, copies): the weights before the first step and
        after each step.

    Example:
        >>> trajectory(1.0, 1e-4, 1000, "nearest")[-1]  # every update rounded away
        tensor([1.])
    """
    start = _checks.real("trajectory", "start", start)
    update = _checks.real("trajectory", "update", update)
    steps = _checks.count("trajectory", "steps", steps, high=_MAX_STEPS, fix="E.g. 1000.")
    copies = _checks.count("trajectory", "copies", copies, high=_MAX_COPIES, fix="E.g. 100.")
    seed = _checks.count("trajectory", "seed", seed, low=0, fix=_SEED)
    _checks.choice("trajectory", "method", method, METHODS)
    weight = torch.full((copies,), start, dtype=torch.bfloat16)
    step, state = torch.full((copies,), update), {}
    generator = torch.Generator().manual_seed(seed)
    out = [weight.float()]
    for _ in range(steps):
        out.append(_add(weight, step, method, state, generator).float())
    return torch.stack(out)


class AdamW(torch.optim.Optimizer):
    """torch.optim.AdamW whose weights may be BF16, written back with a chosen rounding.

    The step is computed in FP32 as torch.optim.AdamW computes it (decoupled weight decay,
    bias-corrected moments), then added to each BF16 parameter with `rounding` (see `add_`).
    FP32 parameters are updated exactly as torch.optim.AdamW updates them.

    Args:
        params: parameters or parameter groups, as for any torch optimizer.
        lr, betas, eps, weight_decay: as torch.optim.AdamW.
        rounding: one of METHODS: "nearest", "stochastic", "kahan" (adds a BF16 buffer per
            weight) or "master" (adds an FP32 copy per weight, made from the BF16 weight at
            the first step).
        moment_dtype: dtype of the moments `exp_avg` and `exp_avg_sq` (float32 or bfloat16);
            each step reads them into FP32 and rounds them back to nearest.
        seed: seeds the random bits of stochastic rounding.

    Raises:
        TypeError: a parameter is neither float32 nor bfloat16.

    Example:
        >>> model = torch.nn.Linear(4, 1).bfloat16()
        >>> opt = AdamW(model.parameters(), lr=1e-3, rounding="stochastic")
    """

    def __init__(
        self,
        params,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 1e-2,
        *,
        rounding: str = "nearest",
        moment_dtype: torch.dtype = torch.float32,
        seed: int = 0,
    ) -> None:
        if isinstance(params, (torch.Tensor, str, bytes)) or not hasattr(params, "__iter__"):
            raise TypeError(
                f"AdamW: `params` must be an iterable of parameters or of parameter groups, got "
                f"{type(params).__name__}; pass model.parameters()."
            )
        lr = _checks.real("AdamW", "lr", lr, low=0, strict=False)
        eps = _checks.real("AdamW", "eps", eps, low=0, strict=False)
        weight_decay = _checks.real("AdamW", "weight_decay", weight_decay, low=0, strict=False)
        if not (isinstance(betas, (tuple, list)) and len(betas) == 2):
            raise TypeError(f"AdamW: `betas` must be a pair (beta1, beta2), got {betas!r}.")
        for i, b in enumerate(betas):
            _checks.real("AdamW", f"betas[{i}]", b, low=0, high=1, strict=False)
            if b == 1:
                raise ValueError(f"AdamW: `betas[{i}]` must be below 1, got {b!r}.")
        _checks.choice("AdamW", "rounding", rounding, METHODS)
        _checks.choice("AdamW", "moment_dtype", moment_dtype, (torch.float32, torch.bfloat16))
        seed = _checks.count("AdamW", "seed", seed, low=0, fix=_SEED)
        self.generator = torch.Generator().manual_seed(seed)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                if p.dtype not in (torch.float32, torch.bfloat16):
                    raise TypeError(
                        f"AdamW: parameters must be float32 or bfloat16, got {p.dtype}; "
                        "cast the model with .float() or .bfloat16()."
                    )
        self.rounding, self.moment_dtype = rounding, moment_dtype

    @torch.no_grad()
    def step(self, closure=None):
        """Take one AdamW step on every parameter that has a gradient."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, (beta1, beta2) = group["lr"], group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p, dtype=self.moment_dtype)
                    state["exp_avg_sq"] = torch.zeros_like(p, dtype=self.moment_dtype)
                state["step"] += 1
                t = state["step"].item()
                g = p.grad.float()
                m, v = state["exp_avg"].float(), state["exp_avg_sq"].float()  # FP32, p's shape
                m.lerp_(g, 1 - beta1)
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
                if self.moment_dtype != torch.float32:  # round the moments to nearest
                    state["exp_avg"].copy_(m)
                    state["exp_avg_sq"].copy_(v)
                w = state["master"] if "master" in state else p.float()
                denom = v.sqrt().div_(math.sqrt(1 - beta2**t)).add_(group["eps"])
                # decoupled decay, as torch, then the Adam step: both from the same weights
                update = (
                    m.div(denom)
                    .mul_(-lr / (1 - beta1**t))
                    .add_(w, alpha=-lr * group["weight_decay"])
                )
                if p.dtype == torch.float32:
                    p.add_(update)
                else:
                    _add(p, update, self.rounding, state, self.generator)
        return loss
