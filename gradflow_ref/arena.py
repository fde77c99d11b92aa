"""The arena: six training recipes race on one deep network, every step measured.

Taught by docs/arena.md (Chapter 8). Each recipe switches on techniques from the earlier chapters
(gradient clipping, BF16/FP16 working weights with FP32 master weights, gradient accumulation,
gradient checkpointing, and all of them with loss scaling) on the same student-teacher task;
the loss, gradient norm, NaN/inf and zero-gradient counts of every step are recorded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from gradflow_ref import _checks
from gradflow_ref.checkpointing import checkpoint_sequential
from gradflow_ref.clipping import clip_grads_with_norm_, get_total_norm
from gradflow_ref.flow import MLPConfig, build_mlp
from gradflow_ref.loss_scaling import GradScaler
from gradflow_ref.master import MasterWeights

__all__ = [
    "ARENA_ACTIVATIONS",
    "OPTIMIZERS",
    "RECIPES",
    "ArenaConfig",
    "Recipe",
    "Run",
    "make_task",
    "race",
    "train",
]

OPTIMIZERS = ("sgd", "adam")
ARENA_ACTIVATIONS = ("tanh", "relu")  # of gradflow_ref.flow.ACTIVATIONS, the two the arena races
TEACHER_SEED = 1234  # the fixed task every seed and recipe learns
EVAL_SAMPLES = 256  # held-out inputs scored every `eval_every` steps


@dataclass(frozen=True)
class Recipe:
    clip: bool = False  # clip the global gradient norm to `max_norm` before the step
    mixed: bool = False  # BF16 (FP16 when cfg.fp16) working weights, FP32 master weights
    accumulate: bool = False  # sum `accum_steps` micro-batches into each optimizer step
    checkpoint: bool = False  # recompute activations in backward (checkpoint_sequential)
    loss_scaling: bool = False  # dynamic GradScaler; acts only when the working dtype is FP16

    def __post_init__(self) -> None:
        for f in ("clip", "mixed", "accumulate", "checkpoint", "loss_scaling"):
            fix = "A string such as 'no' would switch the technique on."
            _checks.boolean("Recipe", f, getattr(self, f), fix)


RECIPES = {
    "baseline": Recipe(),
    "clip": Recipe(clip=True),
    "mixed": Recipe(mixed=True),
    "accum": Recipe(accumulate=True),
    "ckpt": Recipe(checkpoint=True),
    "full": Recipe(clip=True, mixed=True, accumulate=True, checkpoint=True, loss_scaling=True),
}


@dataclass(frozen=True)
class ArenaConfig:
    depth: int = 12  # Linear layers of the student: depth - 1 with an activation, then a read-out
    width: int = 32  # features of the input and of every hidden layer (the output is one number)
    lr: float = 0.1  # learning rate of every recipe
    batch_size: int = 16  # samples per forward pass (per micro-batch when accumulating)
    steps: int = 24  # optimizer steps
    fp16: bool = False  # mixed recipes work in FP16 instead of BF16
    max_norm: float = 1.0  # global-norm threshold of clipping recipes
    accum_steps: int = 4  # micro-batches per optimizer step of accumulating recipes
    segments: int | None = None  # checkpoint_sequential segments; None: round(sqrt(depth))
    optimizer: str = "sgd"  # "sgd" (plain, no momentum) or "adam" (torch defaults)
    activation: str = "tanh"  # "tanh" or "relu", after every Linear layer
    eval_every: int = 4  # steps between scores on the held-out batch (first and last always)
    seed: int = 0  # seeds the student's weights and the training samples
    device: str = "cpu"  # where the student trains; samples are drawn on the CPU, then moved

    def __post_init__(self) -> None:
        func = "ArenaConfig"
        for name in ("depth", "width", "batch_size", "steps", "accum_steps", "eval_every"):
            _checks.integer(func, name, getattr(self, name))
        for name in ("lr", "max_norm"):
            _checks.real(func, name, getattr(self, name), low=0)
        if self.segments is not None:
            modules = 2 * self.depth - 1
            fix = f"None picks round(sqrt(depth)); the student has {modules} modules."
            _checks.integer(func, "segments", self.segments, fix=fix)
            if self.segments > modules:
                raise ValueError(
                    f"{func}: `segments` must be None or an int from 1 to the "
                    f"student's {modules} modules, got {self.segments!r}."
                )
        _checks.boolean(func, "fp16", self.fp16)
        _checks.integer(func, "seed", self.seed, low=0)
        _checks.choice(func, "optimizer", self.optimizer, OPTIMIZERS)
        _checks.choice(func, "activation", self.activation, ARENA_ACTIVATIONS)
        _checks.instance(func, "device", self.device, str, "e.g. 'cpu' or 'cuda'.")
        _checks.device(func, "device", self.device)

    @property
    def n_segments(self) -> int:
        return self.segments if self.segments is not None else max(1, round(self.depth**0.5))


@dataclass
class Run:
    name: str  # the recipe's key in RECIPES (or "custom")
    recipe: Recipe  # the techniques switched on
    config: ArenaConfig  # the task and its knobs
    dtype: torch.dtype  # working precision of weights, activations and gradients
    loss: list[float] = field(default_factory=list)  # per step: mean loss of its samples
    grad_norm: list[float] = field(default_factory=list)  # per step: FP32 norm before clipping
    update_norm: list[float] = field(default_factory=list)  # per step: norm of the weight change
    nonfinite: list[int] = field(default_factory=list)  # per step: inf/NaN working-grad entries
    zero_frac: list[float] = field(default_factory=list)  # per step: working-grad entries == 0
    skipped: list[bool] = field(default_factory=list)  # per step: the loss scaler skipped it
    loss_scale: list[float] = field(default_factory=list)  # per step: scale used (1.0 without)
    eval_steps: list[int] = field(default_factory=list)  # optimizer steps taken when scored
    eval_loss: list[float] = field(default_factory=list)  # held-out loss, FP32 weights
    samples: int = 0  # training samples drawn
    n_params: int = 0  # trainable parameters of the student
    dead_at: int | None = None  # first step after which a weight was inf/NaN (run stopped)

    def __post_init__(self) -> None:
        _checks.instance("Run", "name", self.name, str)
        _checks.instance("Run", "recipe", self.recipe, Recipe)
        _checks.instance("Run", "config", self.config, ArenaConfig)
        _checks.dtype("Run", "dtype", self.dtype)

    @property
    def final_loss(self) -> float:
        """Return the last held-out loss (inf or NaN for a run that blew up)."""
        return self.eval_loss[-1]

    @property
    def first_nonfinite(self) -> int | None:
        """Return the first step whose loss or working gradient held an inf/NaN, or None.

        A step the loss scaler skipped counts: its scaled gradient overflowed.
        """
        for step, (loss, bad) in enumerate(zip(self.loss, self.nonfinite)):
            if bad or not math.isfinite(loss):
                return step
        return None

    @property
    def status(self) -> str:
        """Return "NaN/inf" (a weight or loss became inf/NaN), "worse than start" (finite, but
        the held-out loss ended above its value before training) or "learns"."""
        if self.dead_at is not None or not all(math.isfinite(v) for v in self.loss):
            return "NaN/inf"
        if not self.final_loss < self.eval_loss[0]:
            return "worse than start"
        return "learns"


class _Linear(nn.Module):
    """A bias-free Linear layer whose matmul runs in FP32 and whose output keeps the input dtype.

    With BF16/FP16 inputs and weights this is a tensor core's contract: low-precision operands,
    FP32 accumulation, a low-precision result (and CPU BF16 matmuls are far slower than FP32).
    With FP32 tensors it is plain F.linear.
    """

    def __init__(self, weight: nn.Parameter) -> None:
        super().__init__()
        self.weight = weight  # (out, width), in the working dtype once MasterWeights casts it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32:
            return F.linear(x, self.weight)
        return F.linear(x.float(), self.weight.float()).to(x.dtype)


def _student(cfg: ArenaConfig) -> nn.Sequential:
    layers: list[nn.Module] = []
    if cfg.depth > 1:
        init = "xavier" if cfg.activation == "tanh" else "he"
        hidden = MLPConfig(cfg.depth - 1, cfg.width, cfg.activation, init, seed=cfg.seed)
        layers = [_Linear(m.weight) if isinstance(m, nn.Linear) else m for m in build_mlp(hidden)]
    gen = torch.Generator().manual_seed(cfg.seed + 2)
    readout = torch.randn(1, cfg.width, generator=gen) / math.sqrt(cfg.width)
    # a linear read-out to one number: the output, and so the loss, is unbounded
    return nn.Sequential(*layers, _Linear(nn.Parameter(readout))).to(cfg.device)


def _forward_fp32(weights, activation: str, x: torch.Tensor) -> torch.Tensor:
    act = torch.tanh if activation == "tanh" else torch.relu
    for w in weights[:-1]:
        x = act(F.linear(x, w))
    return F.linear(x, weights[-1])


def _config(func: str, cfg) -> None:
    fix = "Pass ArenaConfig() or ArenaConfig(depth=..., steps=...)."
    _checks.instance(func, "cfg", cfg, ArenaConfig, fix)


def make_task(cfg: ArenaConfig):
    """Return (teacher, x_eval, y_eval): the function every student learns and a held-out batch.

    The teacher is y = v . tanh(A x), A ~ N(0, 4 / width) and v ~ N(0, 1 / width) drawn with seed
    TEACHER_SEED: one number per sample, the same for every seed and recipe. Inputs are N(0, 1);
    x_eval holds EVAL_SAMPLES of them.

    Raises:
        TypeError: `cfg` is not an ArenaConfig.
    """
    _config("make_task", cfg)
    gen = torch.Generator().manual_seed(TEACHER_SEED)
    a = torch.randn(cfg.width, cfg.width, generator=gen) * (2 / math.sqrt(cfg.width))
    v = torch.randn(1, cfg.width, generator=gen) / math.sqrt(cfg.width)

    def teacher(x: torch.Tensor) -> torch.Tensor:
        return F.linear(torch.tanh(F.linear(x, a)), v)

    a, v = a.to(cfg.device), v.to(cfg.device)
    x_eval = torch.randn(EVAL_SAMPLES, cfg.width, generator=gen).to(cfg.device)
    return teacher, x_eval, teacher(x_eval)


def _count_nonfinite(t: torch.Tensor) -> int:
    # a finite sum proves every entry finite (inf and NaN propagate), and is one cheap pass
    if torch.isfinite(t.sum()):
        return 0
    return int((~torch.isfinite(t)).sum())


def _resolve(recipe) -> tuple[str, Recipe]:
    if isinstance(recipe, Recipe):
        return "custom", recipe
    fix = "Or pass a Recipe(...) for another combination."
    _checks.instance("train", "recipe", recipe, (str, Recipe), fix)
    return _checks.choice("train", "recipe", recipe, RECIPES, fix), RECIPES[recipe]


def train(cfg: ArenaConfig, recipe="baseline") -> Run:
    """Train a fresh student with `recipe` on the task of `cfg` and record every step.

    The same `cfg.seed` gives every recipe the same initial weights and draws its samples from
    the same stream (accumulating recipes draw `accum_steps` times as many per step). A step
    that leaves an inf/NaN weight ends the run: later steps cannot recover.

    Args:
        cfg: the task and its knobs (depth, learning rate, batch size, FP16 mode, ...).
        recipe: a key of RECIPES ("baseline", "clip", "mixed", "accum", "ckpt", "full") or a
            Recipe.

    Returns:
        A Run with per-step loss, gradient norm, update norm, inf/NaN count, zero-gradient
        fraction and skipped flag, and the held-out loss every `cfg.eval_every` steps.

    Raises:
        TypeError: `cfg` is not an ArenaConfig, or `recipe` is neither a str nor a Recipe.
        ValueError: `recipe` names no entry of RECIPES.

    Example:
        >>> run = train(ArenaConfig(depth=8, steps=20), "clip")
        >>> len(run.loss), run.first_nonfinite
        (20, None)
    """
    _config("train", cfg)
    name, rec = _resolve(recipe)
    teacher, x_eval, y_eval = make_task(cfg)
    st = _Student.build(cfg, rec)
    run = Run(name, rec, cfg, st.dtype, n_params=sum(p.numel() for p in st.params))
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    _score(run, st, x_eval, y_eval, 0)
    for step in range(cfg.steps):
        x_all = torch.randn(st.micro * cfg.batch_size, cfg.width, generator=gen).to(cfg.device)
        with torch.no_grad():
            y_all = teacher(x_all)
        run.samples += len(x_all)
        loss_sum = st.backward(x_all, y_all)
        after = st.record_and_step(run, loss_sum)
        dead = _count_nonfinite(after) > 0
        if dead or step == cfg.steps - 1 or (step + 1) % cfg.eval_every == 0:
            _score(run, st, x_eval, y_eval, step + 1)
        if dead:
            run.dead_at = step
            break
    return run


@dataclass
class _Student:
    """One recipe's student: working weights, FP32 masters (mixed), optimizer and scaler."""

    cfg: ArenaConfig
    rec: Recipe
    model: nn.Sequential
    dtype: torch.dtype  # working precision
    master: MasterWeights | None
    weights: list[torch.Tensor]  # working precision, where backward writes .grad
    params: list[torch.Tensor]  # FP32, what the optimizer updates
    opt: torch.optim.Optimizer
    scaler: GradScaler | None
    micro: int  # micro-batches per optimizer step

    @classmethod
    def build(cls, cfg: ArenaConfig, rec: Recipe) -> _Student:
        model, dtype, master = _student(cfg), torch.float32, None
        if rec.mixed:
            dtype = torch.float16 if cfg.fp16 else torch.bfloat16
            master = MasterWeights(model, dtype=dtype)  # casts `model` in place
        weights = list(model.parameters())
        params = master.params if master else weights
        # foreach: one kernel per step for all weights, not a Python loop; the same arithmetic
        if cfg.optimizer == "sgd":
            opt = torch.optim.SGD(params, lr=cfg.lr, foreach=True)
        else:
            opt = torch.optim.Adam(params, lr=cfg.lr, foreach=True)
        scaler = None
        if rec.loss_scaling and dtype == torch.float16:
            scaler = GradScaler(torch.device(cfg.device).type)
        micro = cfg.accum_steps if rec.accumulate else 1
        return cls(cfg, rec, model, dtype, master, weights, params, opt, scaler, micro)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.rec.checkpoint:
            # nothing in the student draws random numbers: no RNG state to save and restore
            segments = self.cfg.n_segments
            return checkpoint_sequential(self.model, segments, x, preserve_rng_state=False).float()
        return self.model(x).float()

    def backward(self, x_all: torch.Tensor, y_all: torch.Tensor) -> float:
        """Zero the grads, run every micro-batch's backward; return the summed loss."""
        for p in self.weights + self.params if self.master else self.weights:
            p.grad = None
        loss_sum = 0.0
        for x, y in zip(x_all.chunk(self.micro), y_all.chunk(self.micro)):
            # the loss is taken in FP32; dividing by `micro` makes the sum the big-batch mean
            loss = F.mse_loss(self.forward(x.to(self.dtype)), y) / self.micro
            (self.scaler.scale(loss) if self.scaler else loss).backward()
            loss_sum += loss.item()
        return loss_sum

    @torch.no_grad()
    def record_and_step(self, run: Run, loss_sum: float) -> torch.Tensor:
        """Record the step's gradients, clip and step as the recipe says; return the weights."""
        master, scaler, params = self.master, self.scaler, self.params
        # every weight has `width` columns: one cat along dim 0 flattens them all
        working = torch.cat([p.grad for p in self.weights])
        run.loss.append(loss_sum)
        run.nonfinite.append(_count_nonfinite(working))
        run.zero_frac.append(int((working == 0).sum()) / working.numel())
        if master:
            master.grads_to_master()
        if scaler:
            scaler.unscale_(self.opt)
        norm = get_total_norm([p.grad for p in params])
        run.grad_norm.append(norm.item())
        if self.rec.clip:
            clip_grads_with_norm_(params, self.cfg.max_norm, norm)
        before = torch.cat(params)
        run.loss_scale.append(scaler.get_scale() if scaler else 1.0)
        if scaler:
            skipped_before = scaler.skipped_steps
            scaler.step(self.opt)
            scaler.update()
            run.skipped.append(scaler.skipped_steps > skipped_before)
        else:
            self.opt.step()
            run.skipped.append(False)
        after = torch.cat(params)
        run.update_norm.append(torch.linalg.vector_norm(after - before).item())
        if master:
            master.master_to_model()
        return after


@torch.no_grad()
def _score(run: Run, st: _Student, x_eval, y_eval, step: int) -> None:
    # the FP32 weights the optimizer holds: every recipe is judged the same way
    run.eval_steps.append(step)
    run.eval_loss.append(
        F.mse_loss(_forward_fp32(st.params, run.config.activation, x_eval), y_eval).item()
    )


def race(cfg: ArenaConfig, recipes=tuple(RECIPES)) -> dict[str, Run]:
    """Train every recipe in `recipes` on `cfg` and return {name: Run}, in the given order.

    Raises:
        TypeError: `cfg` is not an ArenaConfig, or `recipes` not a list or tuple.
        ValueError: `recipes` is empty, or names an unknown recipe or one twice.
    """
    _config("race", cfg)
    fix = "Pass e.g. ('baseline', 'clip'), or call train(cfg, recipe) for one."
    _checks.instance("race", "recipes", recipes, (list, tuple), fix)
    if not recipes:
        raise ValueError(
            "race: `recipes` must name at least one recipe, got none; "
            f"pick from {', '.join(RECIPES)}."
        )
    for name in recipes:
        _checks.choice("race", "recipes", name, RECIPES, "Each entry names a recipe.")
    if len(set(recipes)) != len(recipes):
        raise ValueError(
            f"race: `recipes` names a recipe twice, got {list(recipes)}; the result holds one "
            "run per name."
        )
    return {name: train(cfg, name) for name in recipes}
