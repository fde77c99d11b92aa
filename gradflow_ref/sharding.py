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

from gradflow_ref._ranks import run_ranks
from gradflow_ref.memory import MemoryBreakdown, MemoryConfig, training_memory

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


def _check_gpus(n_gpus, where: str) -> None:
    if isinstance(n_gpus, bool) or not isinstance(n_gpus, int) or n_gpus < 1:
        raise ValueError(f"{where}: `n_gpus` must be a positive int, got {n_gpus!r}.")


def sharded_memory(cfg: MemoryConfig, n_gpus: int, stage: int) -> MemoryBreakdown:
    """Return the training memory one of `n_gpus` data-parallel GPUs holds under ZeRO `stage`.

    Sharded parts are divided evenly (rounded up to whole bytes); the rest is replicated.

    Args:
        cfg: the model, precision layout and checkpointing (gradflow_ref.memory.MemoryConfig).
        n_gpus: data-parallel GPUs sharing the state.
        stage: 0 (plain data parallel), 1, 2 or 3 (= FSDP's full sharding).

    Raises:
        TypeError: `cfg` is not a MemoryConfig.
        ValueError: `n_gpus` below 1 or `stage` not in 0-3.

    Example:
        >>> seven_b = MemoryConfig(n_layers=32, hidden=4096, n_heads=32, n_params=7_000_000_000)
        >>> sharded_memory(seven_b, 8, 3).optimizer_states / 1e9
        7.0
    """
    if not isinstance(cfg, MemoryConfig):
        raise TypeError(f"sharded_memory: `cfg` must be a MemoryConfig, got {type(cfg).__name__}.")
    _check_gpus(n_gpus, "sharded_memory")
    if stage not in STAGES or isinstance(stage, bool):
        raise ValueError(f"sharded_memory: `stage` must be 0, 1, 2 or 3, got {stage!r}.")
    full = training_memory(cfg)
    parts = {name: -(-getattr(full, name) // n_gpus) for name in STAGES[stage]}
    return replace(full, **parts)


def chunk_rows(rows: int, n_ranks: int, rank: int) -> int:
    """Return how many of `rows` rows rank `rank` holds when FSDP2 shards dim 0 (torch.chunk)."""
    if rows == 0:
        return 0
    size = -(-rows // n_ranks)
    return max(0, min(size, rows - rank * size))


@dataclass
class FSDPRun:
    parameters: int  # bytes of the rank's parameter shards (FP32: they are the master weights)
    gradients: int  # bytes of the rank's gradient shards
    optimizer_states: int  # bytes of the rank's AdamW exp_avg and exp_avg_sq shards


def predict_fsdp2(shapes: list[tuple[int, ...]], n_ranks: int, rank: int) -> FSDPRun:
    """Return the bytes rank `rank` holds after an AdamW step of a model FSDP2 shards fully.

    FP32 parameters (the master weights), FP32 gradients, two FP32 AdamW states; each
    parameter split along dim 0 as torch.chunk splits it.
    """
    _check_gpus(n_ranks, "predict_fsdp2")
    if not 0 <= rank < n_ranks:
        raise ValueError(f"predict_fsdp2: `rank` must be in 0..{n_ranks - 1}, got {rank!r}.")
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
        TypeError: `cfg` is not a MemoryConfig.
        ValueError: `n_ranks` below 1.
        RuntimeError: a rank raised (its traceback included) or ran past `timeout_s`.
    """
    if not isinstance(cfg, MemoryConfig):
        raise TypeError(f"measure_fsdp2: `cfg` must be a MemoryConfig, got {type(cfg).__name__}.")
    _check_gpus(n_ranks, "measure_fsdp2")
    return run_ranks("gradflow_ref.sharding:fsdp2_step", n_ranks, cfg, timeout_s, "measure_fsdp2")
