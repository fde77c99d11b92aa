"""ZeRO and FSDP: which training state each of N GPUs holds, predicted and measured.

Taught in docs/memory.md. Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training
Trillion Parameter Models" (arXiv:1910.02054): stage 1 shards optimizer states (with any master
weights), stage 2 also gradients, stage 3 also the weights; FSDP2 (`fully_shard`) with
reshard_after_forward=True (its default) is stage 3. `measure_fsdp2` runs `fsdp2_step`, a real
FSDP2 step, on CPU processes (gloo) and reads what each rank holds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from gradflow_ref import _checks
from gradflow_ref._ranks import run_ranks
from gradflow_ref.memory import MemoryBreakdown, MemoryConfig, parameter_count, training_memory
from gradflow_ref.memory import _check as _check_memory_config

__all__ = [
    "STAGES",
    "FSDPRun",
    "sharded_memory",
    "chunk_rows",
    "predict_fsdp2",
    "fsdp2_step",
    "measure_fsdp2",
]

# what each stage shards across the data-parallel GPUs (activations are never sharded)
STAGES = {
    0: (),
    1: ("master_weights", "optimizer_states"),
    2: ("master_weights", "optimizer_states", "gradients"),
    3: ("master_weights", "optimizer_states", "gradients", "weights"),
}


MAX_RANKS = 64  # measure_fsdp2 starts one CPU process per rank, each importing torch


def sharded_memory(cfg: MemoryConfig, n_gpus: int, stage: int) -> MemoryBreakdown:
    """Return the training memory one of `n_gpus` data-parallel GPUs holds under ZeRO `stage`.

    Sharded parts are divided evenly (rounded up to whole bytes); the rest is replicated.

    Args:
        cfg: the model, precision layout and checkpointing (gradflow_ref.memory.MemoryConfig).
        n_gpus: data-parallel GPUs sharing the state.
        stage: 0 (plain data parallel), 1, 2 or 3 (= FSDP's full sharding).

    Raises:
        TypeError: `cfg` is not a MemoryConfig, or `n_gpus` not an int.
        ValueError: `n_gpus` below 1 or `stage` not in 0-3.

    Example:
        >>> seven_b = MemoryConfig(n_layers=32, hidden=4096, n_heads=32, n_params=7_000_000_000)
        >>> sharded_memory(seven_b, 8, 3).optimizer_states / 1e9
        7.0
    """
    _checks.instance("sharded_memory", "cfg", cfg, MemoryConfig)
    _checks.integer("sharded_memory", "n_gpus", n_gpus, fix="Pass the data-parallel GPUs.")
    _checks.choice("sharded_memory", "stage", stage, STAGES, "0 is plain data parallel.")
    full = training_memory(cfg)
    parts = {name: -(-getattr(full, name) // n_gpus) for name in STAGES[stage]}
    return replace(full, **parts)


def chunk_rows(rows: int, n_ranks: int, rank: int) -> int:
    """Return how many of `rows` rows rank `rank` holds when FSDP2 shards dim 0 (torch.chunk).

    Raises:
        TypeError / ValueError: `rows` not an int >= 0, `n_ranks` not >= 1, or `rank` not in
            0..n_ranks - 1.
    """
    _checks.integer("chunk_rows", "rows", rows, low=0)
    _ranks("chunk_rows", n_ranks, rank)
    if rows == 0:
        return 0
    size = -(-rows // n_ranks)
    return max(0, min(size, rows - rank * size))


@dataclass
class FSDPRun:
    parameters: int  # bytes of the rank's parameter shards (FP32: they are the master weights)
    gradients: int  # bytes of the rank's gradient shards
    optimizer_states: int  # bytes of the rank's AdamW exp_avg and exp_avg_sq shards

    def __post_init__(self) -> None:
        for name in ("parameters", "gradients", "optimizer_states"):
            _checks.integer("FSDPRun", name, getattr(self, name), low=0, fix="A count of bytes.")


def predict_fsdp2(shapes: list[tuple[int, ...]], n_ranks: int, rank: int) -> FSDPRun:
    """Return the bytes rank `rank` holds after an AdamW step of a model FSDP2 shards fully.

    FP32 parameters (the master weights), FP32 gradients, two FP32 AdamW states; each
    parameter split along dim 0 as torch.chunk splits it.

    Raises:
        TypeError: `shapes` is not a list or tuple of tuples of ints.
        ValueError: a shape with no dimension or a negative size, or a bad `n_ranks`/`rank`.
    """
    func = "predict_fsdp2"
    _ranks(func, n_ranks, rank)
    _checks.instance(func, "shapes", shapes, (list, tuple), "e.g. [p.shape for p in params].")
    for i, shape in enumerate(shapes):
        _checks.instance(func, f"shapes[{i}]", shape, (tuple, list, torch.Size))
        if not shape:
            raise ValueError(
                f"{func}: `shapes[{i}]` must have at least one dimension (FSDP2 shards dim 0), "
                "got (); hold a scalar as shape (1,)."
            )
        for d in shape:
            _checks.integer(func, f"shapes[{i}]", d, low=0, fix="Sizes are ints >= 0.")
    numel = 0
    for shape in shapes:
        rest = 1
        for d in shape[1:]:
            rest *= d
        numel += chunk_rows(shape[0], n_ranks, rank) * rest
    return FSDPRun(4 * numel, 4 * numel, 8 * numel)


def fsdp2_step(rank: int, world_size: int, cfg: MemoryConfig) -> FSDPRun:
    """Run one rank of an FSDP2 training step of `GPT(cfg)` on the CPU; return its shard bytes.

    The rank joins the process group from torchrun's environment variables (RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT), shards every block and then the root with `fully_shard` (BF16
    compute, FP32 gradient reduction), takes one AdamW step and reads its local shards.
    """
    _check_memory_config(cfg, "fsdp2_step")
    _checks.integer("fsdp2_step", "world_size", world_size)
    _ranks("fsdp2_step", world_size, rank)
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    from gradflow_ref.memory import GPT

    dist.init_process_group("gloo")  # "nccl" on GPUs
    try:
        torch.manual_seed(0)  # every rank builds the same model
        model = GPT(cfg)
        mesh = init_device_mesh("cpu", (world_size,))  # "cuda" on GPUs
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for block in model.layers:
            fully_shard(block, mesh=mesh, mp_policy=policy)
        fully_shard(model, mesh=mesh, mp_policy=policy)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        tokens = torch.randint(0, cfg.vocab, (cfg.micro_batch, cfg.seq_len + 1))
        model(tokens[:, :-1], tokens[:, 1:]).backward()
        opt.step()

        def local_bytes(tensors):  # each DTensor's shard on this rank
            return sum(t.to_local().numel() * t.element_size() for t in tensors)

        params = list(model.parameters())
        states = [opt.state[p][k] for p in params for k in ("exp_avg", "exp_avg_sq")]
        return FSDPRun(
            local_bytes(params), local_bytes(p.grad for p in params), local_bytes(states)
        )
    finally:
        dist.destroy_process_group()


def measure_fsdp2(cfg: MemoryConfig, n_ranks: int = 2, timeout_s: float = 180.0) -> list[FSDPRun]:
    """Train one AdamW step of `GPT(cfg)` with FSDP2 on `n_ranks` CPU processes; read each rank.

    Each rank runs `fsdp2_step`: `fully_shard` on every block and the root over a CPU device
    mesh (gloo), BF16 compute and FP32 gradient reduction, and reports the bytes of its local
    shards. The ranks are processes of their own (gradflow_ref._ranks).

    Raises:
        TypeError: `cfg` is not a MemoryConfig, `n_ranks` not an int or `timeout_s` not a number.
        ValueError: a field of `cfg` GPT cannot build (`n_heads` not dividing `hidden`, ...),
            `cfg.n_params` set (the ranks measure GPT(cfg)'s own), `n_ranks` outside
            1..MAX_RANKS, or `timeout_s` not positive and finite.
        RuntimeError: a rank raised (its traceback included) or ran past `timeout_s`.
    """
    func = "measure_fsdp2"
    _check_memory_config(cfg, func)  # before any process starts
    if cfg.n_params is not None:
        raise ValueError(
            f"measure_fsdp2: `cfg.n_params` must be None: the ranks build GPT(cfg) and measure "
            f"its own {parameter_count(replace(cfg, n_params=None)):,} parameters, not the "
            f"{cfg.n_params:,} given; use sharded_memory to count a model by its parameters."
        )
    _checks.integer(func, "n_ranks", n_ranks, fix="Pass how many CPU processes to start.")
    if n_ranks > MAX_RANKS:
        raise ValueError(
            f"{func}: `n_ranks` must be at most {MAX_RANKS}, got {n_ranks}; each rank is a CPU "
            "process importing torch. Use predict_fsdp2 for larger worlds."
        )
    _checks.real(func, "timeout_s", timeout_s, low=0, fix="Seconds before the ranks are killed.")
    return run_ranks("gradflow_ref.sharding:fsdp2_step", n_ranks, cfg, timeout_s, "measure_fsdp2")


# private helpers of the functions above


def _ranks(func: str, n_ranks, rank) -> None:
    _checks.integer(func, "n_ranks", n_ranks, fix="Pass how many ranks share the model.")
    _checks.integer(func, "rank", rank, low=0)
    if rank >= n_ranks:
        raise ValueError(f"{func}: `rank` must be in 0..{n_ranks - 1}, got {rank!r}.")
