"""Gradient accumulation: sum micro-batch gradients into one optimizer step, alone or under DDP.

Taught in docs/accumulation.md. The divisor and the no_sync() pattern follow Karpathy's
build-nanogpt (train_gpt2.py); DistributedDataParallel is Li et al., "PyTorch Distributed:
Experiences on Accelerating Data Parallel Training" (VLDB 2020).
"""

import contextlib
import datetime
import math
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from gradflow_ref import _checks
from gradflow_ref._ranks import run_ranks

__all__ = [
    "TaskConfig",
    "make_model",
    "make_micro_batches",
    "split_micro_batches",
    "accumulate_grad_",
    "big_batch_grad_",
    "flat_grad",
    "grad_accum_steps",
    "divisor_bug_update_ratio",
    "NoiseCurve",
    "gradient_noise",
    "DDPResult",
    "ddp_accumulate_",
    "ddp_accumulation",
]

MicroBatch = tuple[torch.Tensor, torch.Tensor]  # x: (tokens, d_in) float, y: (tokens,) int64
_LOOPS = 10**6  # most steps or seeds a loop here runs: each is a forward and backward pass
_NORMALIZATIONS = ("global", "micro_mean", "none")


@dataclass(frozen=True)
class TaskConfig:
    d_in: int = 8  # features per token
    hidden: int = 16  # width of the MLP's one hidden layer
    n_classes: int = 5  # classes each token is labelled with (a tiny vocabulary)
    dtype: torch.dtype = torch.float64  # float64 makes "equal" mean equal to ~1e-16
    teacher_seed: int = 1234  # the fixed rule every token's label is drawn from

    def __post_init__(self) -> None:
        for name in ("d_in", "hidden", "n_classes"):
            _checks.count("TaskConfig", name, getattr(self, name))
        _checks.count("TaskConfig", "teacher_seed", self.teacher_seed, low=0)
        if not isinstance(self.dtype, torch.dtype) or not self.dtype.is_floating_point:
            raise TypeError(
                f"TaskConfig: `dtype` must be a floating torch.dtype, got {self.dtype!r}; "
                "use torch.float64 (exact comparisons) or torch.float32."
            )


def _task(func: str, cfg, seed) -> None:
    _checks.instance(func, "cfg", cfg, TaskConfig, "Pass TaskConfig() or leave it out.")
    _checks.count(func, "seed", seed, low=0, fix="torch.manual_seed takes 0 to 2**63 - 1.")


def _module(func: str, model, trained: bool = False) -> nn.Module:
    _checks.instance(func, "model", model, nn.Module, "Pass the nn.Module being trained.")
    if trained and not any(p.requires_grad for p in model.parameters()):
        raise ValueError(
            f"{func}: `model` must have parameters that require grad, got {type(model).__name__} "
            f"with none; pass the model being trained."
        )
    return model


def make_model(cfg: TaskConfig = TaskConfig(), seed: int = 0) -> nn.Module:
    """Build the tiny token classifier used throughout the chapter, identically for a given seed.

    Raises:
        TypeError / ValueError: `cfg` is not a TaskConfig or `seed` not an int >= 0.
    """
    _task("make_model", cfg, seed)
    gen = torch.Generator().manual_seed(seed)
    model = nn.Sequential(
        nn.Linear(cfg.d_in, cfg.hidden), nn.Tanh(), nn.Linear(cfg.hidden, cfg.n_classes)
    ).to(cfg.dtype)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=cfg.dtype) / math.sqrt(p.shape[-1]))
    return model


def make_micro_batches(
    token_counts: Sequence[int], cfg: TaskConfig = TaskConfig(), seed: int = 0
) -> list[MicroBatch]:
    """Draw one micro-batch per entry of `token_counts`: random tokens, labels from a teacher.

    The labels are sampled from softmax(x @ W) with one fixed W (`cfg.teacher_seed`), so every
    seed draws from the same task and the full-data gradient is far from zero.

    Raises:
        TypeError: a count is not an int, or `cfg` is not a TaskConfig.
        ValueError: `token_counts` is empty or holds a count below 1.
    """
    func = "make_micro_batches"
    _task(func, cfg, seed)
    _counts(func, "token_counts", token_counts)
    teacher = torch.randn(
        cfg.d_in,
        cfg.n_classes,
        dtype=cfg.dtype,
        generator=torch.Generator().manual_seed(cfg.teacher_seed),
    )
    gen = torch.Generator().manual_seed(seed)
    batches = []
    for n in token_counts:
        x = torch.randn(int(n), cfg.d_in, generator=gen, dtype=cfg.dtype)
        y = torch.multinomial(torch.softmax(x @ teacher, dim=-1), 1, generator=gen).squeeze(1)
        batches.append((x, y))
    return batches


def _counts(func: str, name: str, counts) -> list[int]:
    if isinstance(counts, (str, bytes)) or not isinstance(counts, Sequence):
        raise TypeError(
            f"{func}: `{name}` must be a sequence of ints, got {type(counts).__name__}."
        )
    if len(counts) < 1:
        raise ValueError(f"{func}: `{name}` must hold at least one count, got none ([]).")
    for n in counts:
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(
                f"{func}: every entry of `{name}` must be an int, got {n!r} in {list(counts)}; "
                "token and micro-batch counts are whole numbers."
            )
        if not 1 <= n <= _checks.INT64_MAX:
            raise ValueError(
                f"{func}: every entry of `{name}` must be from 1 to 2**63 - 1 (torch's sizes), "
                f"got {_checks._show(n)}."
            )
    return list(counts)


def split_micro_batches(x: torch.Tensor, y: torch.Tensor, accum_steps: int) -> list[MicroBatch]:
    """Split one batch into `accum_steps` micro-batches of (nearly) equal token counts.

    Raises:
        TypeError: `x` or `y` is not a tensor.
        ValueError: `x` and `y` differ in length, or `accum_steps` is below 1 or above the
            number of tokens (an empty micro-batch).
    """
    func = "split_micro_batches"
    _checks.instance(func, "x", x, torch.Tensor)
    _checks.instance(func, "y", y, torch.Tensor)
    if x.dim() == 0 or y.dim() == 0 or len(x) != len(y):
        raise ValueError(
            f"{func}: `x` and `y` must hold one label per token, got shapes {tuple(x.shape)} "
            f"and {tuple(y.shape)}; pass the labels of exactly these tokens."
        )
    if (
        isinstance(accum_steps, bool)
        or not isinstance(accum_steps, int)
        or not (1 <= accum_steps <= len(x))
    ):
        raise ValueError(
            f"split_micro_batches: `accum_steps` must be an int from 1 to the "
            f"batch's {len(x)} tokens, got {_checks._show(accum_steps)}."
        )
    return list(zip(x.tensor_split(accum_steps), y.tensor_split(accum_steps)))


def _check_micro_batches(micro_batches, func: str, model=None) -> list[MicroBatch]:
    if isinstance(micro_batches, torch.Tensor) or not isinstance(micro_batches, Iterable):
        raise TypeError(
            f"{func}: `micro_batches` must be a list of (x, y) tensor pairs, got "
            f"{type(micro_batches).__name__}; make them with make_micro_batches or "
            "split_micro_batches."
        )
    micro_batches = list(micro_batches)
    if not micro_batches:
        raise ValueError(
            f"{func}: `micro_batches` must hold at least one micro-batch "
            "(accumulation steps >= 1), got none ([])."
        )
    for i, pair in enumerate(micro_batches):
        if not (
            isinstance(pair, (tuple, list))
            and len(pair) == 2
            and all(isinstance(t, torch.Tensor) and t.dim() > 0 for t in pair)
        ):
            raise TypeError(
                f"{func}: `micro_batches[{i}]` must be an (x, y) pair of tensors, got "
                f"{type(pair).__name__} of {len(pair) if isinstance(pair, (tuple, list)) else 1}; "
                "make them with make_micro_batches."
            )
        x, y = pair
        if model is not None and len(x):
            _checks.float_batch(func, f"micro_batches[{i}][0]", model, x)
            classes = _checks.out_classes(model)
            if classes is not None and len(x) == len(y):
                _checks.class_targets(func, f"micro_batches[{i}][1]", y, classes, len(x))
        if len(x) == 0 or len(x) != len(y):
            raise ValueError(
                f"{func}: `micro_batches[{i}]` must hold >= 1 token with one label "
                f"each, got {len(x)} tokens and {len(y)} labels; drop empty "
                "micro-batches (their mean loss is nan)."
            )
    return micro_batches


def _max_norm(func: str, max_norm) -> None:
    if max_norm is not None:
        _checks.bounded(func, "max_norm", max_norm, low=0, fix="Or None for no clipping.")


def accumulate_grad_(
    model: nn.Module,
    micro_batches: Sequence[MicroBatch],
    normalization: str = "global",
    max_norm: float | None = None,
    clip: str = "once",
) -> torch.Tensor:
    """Zero the grads, then run forward and backward on each micro-batch, summing into `.grad`.

    Each micro-batch's summed token loss is divided by a normalizer before backward:
    "global": the token count of all micro-batches together (equals the big batch, always);
    "micro_mean": its own token count times the number of micro-batches (build-nanogpt's
    `loss / grad_accum_steps`; equals the big batch only when all counts are equal);
    "none": its own token count only (the missing-divisor bug).

    Args:
        model: any module mapping x (tokens, d_in) to logits (tokens, n_classes).
        micro_batches: the (x, y) pairs of one optimizer step.
        normalization: "global", "micro_mean" or "none", as above.
        max_norm: clip the global gradient norm to this; None for no clipping.
        clip: "once" clips after the last micro-batch; "each" after every backward (a bug).

    Returns:
        The value of the objective whose gradient is now in `.grad` (a detached scalar).

    Raises:
        ValueError: no micro-batches, an empty micro-batch, or an unknown option.

    Example:
        >>> model, batches = make_model(), make_micro_batches([8, 8, 8, 8])
        >>> loss = accumulate_grad_(model, batches)          # == big_batch_grad_(model, batches)
    """
    func = "accumulate_grad_"
    micro_batches = _check_micro_batches(micro_batches, func, _module(func, model, True))
    if normalization not in _NORMALIZATIONS:
        raise ValueError(
            f"{func}: `normalization` must be one of {_NORMALIZATIONS}, got {normalization!r}."
        )
    if clip not in ("once", "each"):
        raise ValueError(f"{func}: `clip` must be 'once' or 'each', got {clip!r}.")
    _max_norm(func, max_norm)
    steps = len(micro_batches)
    total_tokens = sum(len(x) for x, _ in micro_batches)
    model.zero_grad(set_to_none=True)
    objective = 0.0
    for x, y in micro_batches:
        divisor = {"global": total_tokens, "micro_mean": len(x) * steps, "none": len(x)}
        loss = F.cross_entropy(model(x), y, reduction="sum") / divisor[normalization]
        loss.backward()  # adds into .grad: the sum over micro-batches is built here
        objective += loss.detach()
        if max_norm is not None and clip == "each":
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    if max_norm is not None and clip == "once":
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    return objective


def big_batch_grad_(
    model: nn.Module, micro_batches: Sequence[MicroBatch], max_norm: float | None = None
) -> torch.Tensor:
    """Zero the grads, then run one forward and backward on all micro-batches concatenated.

    Returns:
        The mean token loss of the big batch (a detached scalar).
    """
    func = "big_batch_grad_"
    micro_batches = _check_micro_batches(micro_batches, func, _module(func, model, True))
    _max_norm(func, max_norm)
    x = torch.cat([x for x, _ in micro_batches])
    y = torch.cat([y for _, y in micro_batches])
    model.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)  # mean over every token of the step
    loss.backward()
    if max_norm is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
    return loss.detach()


def flat_grad(model: nn.Module) -> torch.Tensor:
    """Return all parameter gradients as one flat vector (zeros where `.grad` is None).

    Raises:
        TypeError: `model` is not an nn.Module.
        ValueError: `model` has no parameters.
        RuntimeError: no parameter has a gradient yet (backward has not run).
    """
    if not list(_module("flat_grad", model).parameters()):
        raise ValueError("flat_grad: `model` has no parameters, so there is no gradient to read.")
    if all(p.grad is None for p in model.parameters()):
        raise RuntimeError(
            "flat_grad: no parameter of `model` has a gradient (every .grad is None); run "
            "loss.backward() first, or accumulate_grad_ / big_batch_grad_."
        )
    return torch.cat(
        [
            (p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
            for p in model.parameters()
        ]
    )


def grad_accum_steps(
    total_batch_size: int, micro_batch_size: int, seq_len: int, world_size: int = 1
) -> int:
    """Return the micro-steps per optimizer step so that B * T * world_size * steps = total.

    Args:
        total_batch_size: tokens per optimizer step (build-nanogpt: 524288 = 2**19).
        micro_batch_size: sequences per micro-batch on one rank (B).
        seq_len: tokens per sequence (T).
        world_size: data-parallel ranks, each adding B * T tokens per micro-step.

    Raises:
        ValueError: an argument is below 1, or the total is not a multiple of B * T * world_size.
    """
    args = {
        "total_batch_size": total_batch_size,
        "micro_batch_size": micro_batch_size,
        "seq_len": seq_len,
        "world_size": world_size,
    }
    for name, value in args.items():
        _checks.count("grad_accum_steps", name, value, fix="Pass a count of tokens or ranks.")
    per_micro_step = micro_batch_size * seq_len * world_size
    if total_batch_size % per_micro_step:
        raise ValueError(
            f"grad_accum_steps: `total_batch_size` must be a multiple of "
            f"micro_batch_size * seq_len * world_size = {per_micro_step}, got "
            f"{total_batch_size}; the accumulation steps would be "
            f"{total_batch_size / per_micro_step:.3f}."
        )
    return total_batch_size // per_micro_step


def divisor_bug_update_ratio(
    optimizer: str,
    accum_steps: int = 8,
    steps: int = 1,
    max_norm: float | None = None,
    micro_batch_tokens: int = 16,
    cfg: TaskConfig = TaskConfig(),
    seed: int = 0,
) -> float:
    """Return |change of the weights| without the divisor over the same with it.

    Both runs start from the same weights and see the same micro-batches; only the loss
    normalization differs ("none" vs "micro_mean").

    Args:
        optimizer: "sgd" (lr 0.1) or "adamw" (lr 1e-3, torch's other defaults).
        accum_steps: micro-batches per optimizer step.
        steps: optimizer steps taken.
        max_norm: clip the accumulated gradient to this first; None for no clipping.
        micro_batch_tokens: tokens per micro-batch.
        cfg: the task.
        seed: weights and data.

    Raises:
        ValueError: unknown `optimizer`, or `accum_steps` / `steps` below 1.
    """
    func = "divisor_bug_update_ratio"
    if optimizer not in ("sgd", "adamw"):
        raise ValueError(f"{func}: `optimizer` must be 'sgd' or 'adamw', got {optimizer!r}.")
    _checks.count(func, "accum_steps", accum_steps, fix="Pass micro-batches per step, e.g. 8.")
    _checks.count(func, "steps", steps, high=_LOOPS, fix="Pass optimizer steps, e.g. 1.")
    _checks.count(func, "micro_batch_tokens", micro_batch_tokens, fix="Pass e.g. 16.")
    _max_norm(func, max_norm)
    _task(func, cfg, seed)
    moved = []
    for normalization in ("none", "micro_mean"):
        model = make_model(cfg, seed)
        start = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        opt = (
            torch.optim.SGD(model.parameters(), lr=0.1)
            if optimizer == "sgd"
            else torch.optim.AdamW(model.parameters(), lr=1e-3)
        )
        for step in range(steps):
            batches = make_micro_batches([micro_batch_tokens] * accum_steps, cfg, seed + 1 + step)
            accumulate_grad_(model, batches, normalization, max_norm)
            opt.step()
        end = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
        moved.append(torch.linalg.vector_norm(end - start))
    return (moved[0] / moved[1]).item()


@dataclass
class NoiseCurve:
    ns: list[int]  # micro-batches accumulated per optimizer step
    rel_error: list[float]  # RMS |accumulated grad - full-data grad| / |full-data grad|, per N
    reference: list[float]  # rel_error[0] * sqrt(ns[0] / N): the 1/sqrt(N) law through point 0

    def __post_init__(self) -> None:
        _counts("NoiseCurve", "ns", self.ns)
        for name in ("rel_error", "reference"):
            values = _checks.instance("NoiseCurve", name, getattr(self, name), list)
            if len(values) != len(self.ns):
                raise ValueError(
                    f"NoiseCurve: `{name}` and `ns` must be as long as each other (one value "
                    f"per N), got {len(values)} values for the {len(self.ns)} N in `ns`."
                )
            for v in values:
                _checks.real("NoiseCurve", name, v, low=0, strict=False)


def gradient_noise(
    ns: Sequence[int] = (1, 2, 4, 8, 16),
    micro_batch_tokens: int = 4,
    n_seeds: int = 24,
    pool_tokens: int = 4096,
    cfg: TaskConfig = TaskConfig(),
    seed: int = 0,
) -> NoiseCurve:
    """Measure how far the accumulated gradient lands from the full-data gradient, per N.

    Micro-batches are drawn with replacement from a fixed pool of tokens; for each N the error
    is averaged over `n_seeds` draws. Independent draws predict a fall of 1/sqrt(N).

    Raises:
        TypeError: an N, a count or `cfg` of the wrong type.
        ValueError: an N below 1, fewer than 2 seeds, or a token count below 1.
    """
    func = "gradient_noise"
    _counts(func, "ns", ns)
    _checks.count(func, "n_seeds", n_seeds, 2, _LOOPS, fix="The error is an RMS over seeds.")
    _checks.count(func, "micro_batch_tokens", micro_batch_tokens, fix="Pass e.g. 4.")
    _checks.count(func, "pool_tokens", pool_tokens, fix="Pass the pool size, e.g. 4096.")
    _task(func, cfg, seed)
    if sum(ns) * n_seeds > _LOOPS:  # every micro-batch of every N, n_seeds times
        raise ValueError(
            f"{func}: `ns` and `n_seeds` ask for sum(ns) * n_seeds = "
            f"{_checks._show(sum(ns) * n_seeds)} forward and backward passes, more than "
            f"{_LOOPS}; pass fewer or smaller N (e.g. (1, 2, 4, 8, 16)) or fewer seeds."
        )
    model = make_model(cfg, seed)
    pool = make_micro_batches([pool_tokens], cfg, seed)
    big_batch_grad_(model, pool)
    full = flat_grad(model).clone()
    x, y = pool[0]
    gen = torch.Generator().manual_seed(seed + 1)
    rel_error = []
    for n in ns:
        sq = 0.0
        for _ in range(n_seeds):
            idx = torch.randint(0, pool_tokens, (int(n), micro_batch_tokens), generator=gen)
            accumulate_grad_(model, [(x[i], y[i]) for i in idx])
            sq += (torch.linalg.vector_norm(flat_grad(model) - full) ** 2).item()
        rel_error.append(math.sqrt(sq / n_seeds) / torch.linalg.vector_norm(full).item())
    reference = [rel_error[0] * math.sqrt(ns[0] / n) for n in ns]
    return NoiseCurve(list(ns), rel_error, reference)


# ---------------------------------------------------------------------------------------------
# Distributed accumulation: ranks as processes of their own (gradflow_ref._ranks), gloo, DDP.


@dataclass
class DDPResult:
    world_size: int  # ranks (processes), each on the CPU
    accum_steps: int  # micro-batches per rank per optimizer step
    tokens: int  # tokens in the global batch: world_size * accum_steps * micro_batch_tokens
    max_abs_diff: float  # max |DDP grad (no_sync) - single-process big-batch grad|
    max_abs_diff_sync_every_step: float  # the same, syncing on every micro-step
    rank_disagreement: float  # max |grad on rank 0 - grad on any other rank| after the step
    allreduces_no_sync: int  # gradient all-reduces per optimizer step with no_sync()
    allreduces_sync_every_step: int  # gradient all-reduces per optimizer step without it
    seconds: float  # wall time, process start-up included
    warnings: list[str] = field(default_factory=list, repr=False)  # what the ranks warned

    def __post_init__(self) -> None:
        for name in ("world_size", "accum_steps", "tokens"):
            _checks.integer("DDPResult", name, getattr(self, name))
        for name in ("allreduces_no_sync", "allreduces_sync_every_step"):
            _checks.integer("DDPResult", name, getattr(self, name), low=0)
        for name in ("max_abs_diff", "max_abs_diff_sync_every_step", "rank_disagreement"):
            _checks.number("DDPResult", name, getattr(self, name))  # nan: the ranks disagreed
            if getattr(self, name) < 0:
                raise ValueError(f"DDPResult: `{name}` must be >= 0, got {getattr(self, name)!r}.")
        _checks.real("DDPResult", "seconds", self.seconds, low=0, strict=False)

    @property
    def allreduces_saved(self) -> int:
        return self.allreduces_sync_every_step - self.allreduces_no_sync


def ddp_accumulate_(model: nn.Module, micro_batches: Sequence[MicroBatch], sync: str = "last"):
    """Accumulate `micro_batches` in a DistributedDataParallel `model`, as build-nanogpt does.

    Each micro-batch's mean loss is divided by their number; DDP averages over ranks. With
    sync="last" every backward but the last runs under `model.no_sync()`, so the gradients are
    summed locally and all-reduced once; with sync="every" each backward all-reduces.

    Raises:
        ValueError: `sync` is neither "last" nor "every".
    """
    if sync not in ("last", "every"):
        raise ValueError(f"ddp_accumulate_: `sync` must be 'last' or 'every', got {sync!r}.")
    micro_batches = _check_micro_batches(
        micro_batches, "ddp_accumulate_", _module("ddp_accumulate_", model)
    )
    if sync == "last" and len(micro_batches) > 1 and not hasattr(model, "no_sync"):
        raise TypeError(
            f"ddp_accumulate_: `model` must be wrapped in DistributedDataParallel for "
            f"sync='last' (it calls model.no_sync()), got {type(model).__name__}; wrap it "
            "with DDP(model) inside a process group, or pass sync='every'."
        )
    for k, (x, y) in enumerate(micro_batches):
        last = k == len(micro_batches) - 1
        with contextlib.nullcontext() if last or sync == "every" else model.no_sync():
            loss = F.cross_entropy(model(x), y) / len(micro_batches)
            loss.backward()  # under no_sync: local sum only; otherwise all-reduced here


def _ddp_rank(rank: int, world_size: int, spec: dict) -> tuple:
    """Run one rank (a process of its own, see gradflow_ref._ranks); return its gradients."""
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    def counting_hook(calls: list, bucket):
        calls.append(1)  # one call per gradient bucket all-reduced
        return allreduce_hook(None, bucket)  # DDP's default: all-reduce, divide by world size

    torch.set_num_threads(1)
    timeout = datetime.timedelta(seconds=spec["timeout_s"])
    dist.init_process_group("gloo", timeout=timeout)  # rank and world size from the environment
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            steps, tokens = spec["accum_steps"], spec["micro_batch_tokens"]
            batches = make_micro_batches([tokens] * (world_size * steps), seed=spec["seed"])
            mine = batches[rank * steps : (rank + 1) * steps]  # each rank sees its own data
            out = {}
            for sync in ("last", "every"):
                model, calls = DDP(make_model(seed=spec["seed"])), []
                model.register_comm_hook(calls, counting_hook)
                ddp_accumulate_(model, mine, sync)
                out[sync] = (flat_grad(model.module).tolist(), len(calls))
        # no rank tears down while the other still talks to it; holding `barrier` until the group
        # is gone keeps its last reference here: dropped by gloo's thread, it needs the GIL that
        # destroy_process_group holds while it joins that thread (a deadlock, 3 runs in 150)
        barrier = dist.barrier(async_op=True)
        barrier.wait()
    finally:
        dist.destroy_process_group()
    return rank, out, [str(w.message) for w in caught]


_DDP_TOKENS = 10**7  # the global batch also runs whole in this process, for the reference


def _check_ddp(world_size, accum_steps, micro_batch_tokens, seed, timeout_s) -> None:
    import torch.distributed as dist

    from gradflow_ref._ranks import MAX_RANKS, MAX_TIMEOUT_S

    func = "ddp_accumulation"
    _checks.count(func, "world_size", world_size, high=MAX_RANKS, fix="Each rank is a process.")
    _checks.count(func, "accum_steps", accum_steps, fix="Pass micro-batches per rank, e.g. 4.")
    _checks.count(func, "micro_batch_tokens", micro_batch_tokens, fix="Pass e.g. 8.")
    _checks.count(func, "seed", seed, low=0, fix="torch.manual_seed takes 0 to 2**63 - 1.")
    _checks.bounded(func, "timeout_s", timeout_s, 0, MAX_TIMEOUT_S, "E.g. 180.0.", strict=False)
    if timeout_s == 0:
        raise ValueError(f"{func}: `timeout_s` must be positive, got {timeout_s!r}; e.g. 180.0.")
    tokens = world_size * accum_steps * micro_batch_tokens
    if tokens > _DDP_TOKENS:
        raise ValueError(
            f"{func}: the global batch world_size * accum_steps * micro_batch_tokens must be at "
            f"most {_DDP_TOKENS} tokens (this process also runs it whole), got "
            f"{_checks._show(tokens)}; lower `accum_steps` or `micro_batch_tokens`."
        )
    if not dist.is_available() or not dist.is_gloo_available():
        raise RuntimeError(
            f"{func}: this torch build has no gloo backend; install a torch "
            "build with torch.distributed support."
        )


def ddp_accumulation(
    world_size: int = 2,
    accum_steps: int = 4,
    micro_batch_tokens: int = 8,
    seed: int = 0,
    timeout_s: float = 180.0,
) -> DDPResult:
    """Accumulate under DistributedDataParallel in `world_size` real processes and check it.

    Each rank runs `ddp_accumulate_` on its own `accum_steps` micro-batches, once syncing only
    on the last (`no_sync()` on the others) and once syncing on every micro-step; a comm hook
    counts the all-reduces. The ranks are CPU processes of their own (gradflow_ref._ranks),
    talking over gloo on 127.0.0.1; this process computes the single-process big batch.

    Args:
        world_size: processes to start (ranks).
        accum_steps: micro-batches per rank per optimizer step.
        micro_batch_tokens: tokens per micro-batch.
        seed: weights and data, the same on every rank and here.
        timeout_s: give up (and kill the ranks) after this many seconds.

    Returns:
        A DDPResult with the max gradient difference and the all-reduce counts.

    Raises:
        ValueError: an argument below 1, or a non-positive timeout.
        RuntimeError: this torch has no gloo, a rank raised (its traceback included), or the
            ranks did not finish in time.

    Example:
        >>> ddp_accumulation(world_size=2, accum_steps=4).allreduces_saved
        3
    """
    _check_ddp(world_size, accum_steps, micro_batch_tokens, seed, timeout_s)
    start = time.perf_counter()
    spec = dict(
        accum_steps=accum_steps,
        micro_batch_tokens=micro_batch_tokens,
        seed=seed,
        timeout_s=timeout_s,
    )
    ranks = run_ranks(
        "gradflow_ref.accumulation:_ddp_rank", world_size, spec, timeout_s, "ddp_accumulation"
    )
    model = make_model(seed=seed)
    big_batch_grad_(
        model, make_micro_batches([micro_batch_tokens] * (world_size * accum_steps), seed=seed)
    )
    reference = flat_grad(model)
    grads = {
        s: [torch.tensor(out[s][0], dtype=reference.dtype) for _, out, _ in ranks]
        for s in ("last", "every")
    }
    first = ranks[0][1]
    return DDPResult(
        world_size=world_size,
        accum_steps=accum_steps,
        tokens=world_size * accum_steps * micro_batch_tokens,
        max_abs_diff=(grads["last"][0] - reference).abs().max().item(),
        max_abs_diff_sync_every_step=(grads["every"][0] - reference).abs().max().item(),
        rank_disagreement=max((g - gs[0]).abs().max().item() for gs in grads.values() for g in gs),
        allreduces_no_sync=first["last"][1],
        allreduces_sync_every_step=first["every"][1],
        seconds=time.perf_counter() - start,
        warnings=[w for _, _, caught in ranks for w in caught],
    )
