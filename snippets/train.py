# --8<-- [start:imports]
import argparse
import dataclasses
import math
import os
import resource
import time
from functools import partial
from importlib.resources import files
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

from gradflow_ref.memory import GPT, MemoryConfig

# --8<-- [end:imports]
# --8<-- [start:config]
PRECISIONS = ("fp32", "bf16", "fp16", "bf16-pure")
CHECKPOINTING = ("none", "full", "selective")
AT_LEAST_1 = "n_layers hidden n_heads seq_len micro_batch accum_steps steps eval_every".split()


@dataclasses.dataclass
class Config:
    n_layers: int = 4  # transformer blocks
    hidden: int = 128  # width of the residual stream
    n_heads: int = 4  # attention heads
    seq_len: int = 128  # tokens per sequence (one token per byte of text)
    micro_batch: int = 8  # sequences per micro-batch on each process
    accum_steps: int = 1  # micro-batches per optimizer step
    steps: int = 200  # optimizer steps
    lr: float = 3e-3  # peak learning rate
    warmup: int = 20  # steps of linear warmup, then cosine decay to lr / 10
    weight_decay: float = 0.1  # AdamW's decoupled weight decay
    max_norm: float = 1.0  # global gradient-norm clipping; 0 switches it off
    precision: str = "bf16"  # "fp32", "bf16", "fp16" (FP32 masters) or "bf16-pure" (none)
    loss_scaling: bool = True  # GradScaler for "fp16"
    checkpointing: str = "none"  # "none", "full" (recompute each block) or "selective"
    seed: int = 0  # model initialisation and batch order
    eval_every: int = 50  # steps between held-out evaluations (the last step always)
    ckpt_dir: str = ""  # where save_every saves and --resume loads; empty: this folder
    save_every: int = 0  # steps between checkpoints; 0: none
    resume: bool = False  # continue from the checkpoint in ckpt_dir
    max_seconds: float = 0.0  # stop after this many seconds of training; 0: run every step
    print_every: int = 10  # steps between progress lines (rank 0); 0: none

    def __post_init__(self):
        for name, allowed in (("precision", PRECISIONS), ("checkpointing", CHECKPOINTING)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"`{name}` must be one of {allowed}, got {getattr(self, name)!r}")
        for f in dataclasses.fields(self):  # sizes and counts at least 1, the rest at least 0
            low, value = int(f.name in AT_LEAST_1), getattr(self, f.name)
            if f.type in (int, float) and value < low:
                raise ValueError(f"`{f.name}` must be at least {low}, got {value}")


# --8<-- [end:config]
# --8<-- [start:data]
def load_text():
    text = (files("gradflow_ref") / "data" / "shakespeare.txt").read_bytes()  # or your text
    data = torch.frombuffer(bytearray(text), dtype=torch.uint8).long()  # one token per byte
    split = int(0.9 * len(data))
    return data[:split], data[split:]


def batch(data, cfg, step, micro, rank, world, device):
    g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
    n = cfg.accum_steps * world * cfg.micro_batch
    starts = torch.randint(len(data) - cfg.seq_len - 1, (n,), generator=g)
    first = (micro * world + rank) * cfg.micro_batch
    rows = [data[s : s + cfg.seq_len + 1] for s in starts[first : first + cfg.micro_batch]]
    tokens = torch.stack(rows).to(device)
    return tokens[:, :-1], tokens[:, 1:]  # inputs, and the next token of each as its target


# --8<-- [end:data]
# --8<-- [start:model]
def build_model(cfg, mesh, device):
    torch.manual_seed(cfg.seed)
    shape = MemoryConfig(cfg.n_layers, cfg.hidden, cfg.n_heads, cfg.seq_len, 1, 256)
    model = GPT(shape, dropout=0.0).to(device)
    for name, p in model.named_parameters():  # GPT-2's initialisation
        if p.dim() == 2:
            deep = name.endswith(("proj.weight", "fc2.weight"))  # writes to the residual stream
            nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layers) if deep else 0.02)
        elif name.endswith("bias"):
            nn.init.zeros_(p)
    if cfg.precision == "bf16-pure":
        model = model.to(torch.bfloat16)
    if cfg.checkpointing != "none":  # recompute each block's activations during backward
        keep = [torch.ops.aten.mm.default, torch.ops.aten.addmm.default]  # "selective" keeps these
        kw = {"context_fn": partial(create_selective_checkpoint_contexts, keep)}
        kw = kw if cfg.checkpointing == "selective" else {}
        for block in model.layers:
            block.forward = partial(checkpoint, block.forward, use_reentrant=False, **kw)
    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.precision)
    policy = MixedPrecisionPolicy(param_dtype=low, reduce_dtype=torch.float32)
    for module in (*model.layers, model):  # every block, then the rest (embeddings, final norm)
        fully_shard(module, mesh=mesh, mp_policy=policy)
    return model, low


# --8<-- [end:model]
# --8<-- [start:step]
def lr_at(cfg, step):
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    progress = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr / 10 + 0.9 * cfg.lr * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def train_step(model, opt, scaler, data, cfg, step, low, world):
    rank, device = dist.get_rank(), next(model.parameters()).device
    done = opt.state[opt.param_groups[0]["params"][0]].get("step", 0)  # AdamW's count of steps
    lr = lr_at(cfg, int(done))  # taken: a step the scaler skipped does not advance the schedule
    for group in opt.param_groups:
        group["lr"] = lr
    opt.zero_grad(set_to_none=True)
    total = torch.zeros((), device=device)
    for micro in range(cfg.accum_steps):
        model.set_requires_gradient_sync(micro == cfg.accum_steps - 1)
        x, y = batch(data, cfg, step, micro, rank, world, device)
        with torch.autocast(device.type, dtype=low or torch.float32, enabled=low is not None):
            loss = model(x, y) / cfg.accum_steps
        scaler.scale(loss).backward()
        total += loss.detach()
    scaler.unscale_(opt)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_norm or math.inf)
    norm = norm.full_tensor()  # the global norm, a DTensor; clipping above already used it
    scale = scaler.get_scale()  # 1.0 when the scaler is off
    scaler.step(opt)
    scaler.update()
    dist.all_reduce(total)
    clipped, skipped = 0 < cfg.max_norm < norm.item(), scale > scaler.get_scale()
    record = dict(step=step, loss=total.item() / world, grad_norm=norm.item(), lr=lr)
    return record | dict(clipped=clipped, skipped=skipped, loss_scale=scale)


@torch.no_grad()
def evaluate(model, data, cfg, low, world):
    rank, device = dist.get_rank(), next(model.parameters()).device
    fixed = torch.Generator().manual_seed(0)  # the same 32 sequences for every run and seed
    n = max(32, world)
    starts = torch.randint(len(data) - cfg.seq_len - 1, (n,), generator=fixed)[rank::world]
    tokens = torch.stack([data[s : s + cfg.seq_len + 1] for s in starts]).to(device)
    with torch.autocast(device.type, dtype=low or torch.float32, enabled=low is not None):
        total = model(tokens[:, :-1], tokens[:, 1:]) * len(starts)
    dist.all_reduce(total)
    return total.item() / n


# --8<-- [end:step]
# --8<-- [start:checkpoint]
def state_of(model, opt, scaler, step):
    model_state, optim_state = get_state_dict(model, opt)
    return {"model": model_state, "optim": optim_state, "step": step, "scaler": scaler.state_dict()}


def save(cfg, model, opt, scaler, step):
    path = os.path.join(cfg.ckpt_dir, f"step-{step:06d}")
    dcp.save(state_of(model, opt, scaler, step), checkpoint_id=path)


def load(cfg, model, opt, scaler):
    saved = sorted(p.parent for p in Path(cfg.ckpt_dir).glob("step-*/.metadata"))  # complete
    if not saved:
        raise FileNotFoundError(f"--resume: `ckpt_dir` {cfg.ckpt_dir!r} holds no step-* checkpoint")
    state = state_of(model, opt, scaler, 0)
    dcp.load(state, checkpoint_id=saved[-1])
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    scaler.load_state_dict(state["scaler"])
    return state["step"]


# --8<-- [end:checkpoint]
# --8<-- [start:main]
def train(cfg):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":  # torchrun's LOCAL_RANK: this process's GPU on its node
        device = f"cuda:{os.environ.get('LOCAL_RANK', 0)}"
        torch.cuda.set_device(device)
    device = torch.device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    # torchrun sets RANK and the rendezvous; python train.py alone is a world of one process
    alone = {} if "RANK" in os.environ else dict(store=dist.HashStore(), rank=0, world_size=1)
    gpu = device if device.type == "cuda" else None  # NCCL binds this rank to its GPU up front
    dist.init_process_group(backend, device_id=gpu, **alone)
    world, rank = dist.get_world_size(), dist.get_rank()
    mesh = init_device_mesh(device.type, (world,))
    train_data, val_data = load_text()
    model, low = build_model(cfg, mesh, device)
    params = list(model.parameters())  # weight decay on the matrices, not on biases or LayerNorms
    groups = [[p for p in params if p.dim() >= 2], [p for p in params if p.dim() < 2]]
    groups = [{"params": groups[0]}, {"params": groups[1], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, cfg.lr, weight_decay=cfg.weight_decay, fused=True)
    scaler = torch.amp.GradScaler(device.type, enabled=cfg.precision == "fp16" and cfg.loss_scaling)
    start = load(cfg, model, opt, scaler) if cfg.resume else 0
    log, t0, tokens = [], time.perf_counter(), 0
    for step in range(start, cfg.steps):
        record = train_step(model, opt, scaler, train_data, cfg, step, low, world)
        tokens += cfg.accum_steps * world * cfg.micro_batch * cfg.seq_len
        record["tokens_per_s"] = tokens / (time.perf_counter() - t0)
        late = float(0 < cfg.max_seconds < time.perf_counter() - t0)
        out_of_time = torch.tensor(late, device=device)
        dist.all_reduce(out_of_time, op=dist.ReduceOp.MAX)  # one decision for every rank
        last = step == cfg.steps - 1 or out_of_time.item() > 0
        if (step + 1) % cfg.eval_every == 0 or last:
            record["val_loss"] = evaluate(model, val_data, cfg, low, world)
        log.append(record)
        if rank == 0 and cfg.print_every and (step % cfg.print_every == 0 or "val_loss" in record):
            print(", ".join(f"{k} {v:.6g}" for k, v in record.items() if not isinstance(v, bool)))
        if cfg.save_every and ((step + 1) % cfg.save_every == 0 or last):
            save(cfg, model, opt, scaler, step + 1)
        if last:
            break
    model.reshard()  # this rank's shards only (evaluation left the root's parameters gathered)
    states = [s for p in params for s in opt.state[p].values() if s.dim() > 0]
    grads = [p.grad for p in params if p.grad is not None]  # none when resumed at the end
    held = [sum(t.to_local().nbytes for t in ts) for ts in (params, grads, states)]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10  # MiB (Linux counts KiB)
    peak = torch.cuda.max_memory_allocated(device) >> 20 if device.type == "cuda" else peak
    for r in range(world):  # one rank after the other, so that their lines do not interleave
        if r == rank and cfg.print_every:
            print(f"rank {rank}/{world}: {held} B of params, grads, AdamW states; peak {peak} MiB")
        dist.barrier()
    dist.destroy_process_group()
    return {"log": log, "rank": rank, "world": world, "held_bytes": held, "peak_mib": peak}


def main(argv=None):
    parser = argparse.ArgumentParser(description="Train a small GPT on text, one token per byte.")
    for field in dataclasses.fields(Config):
        kind = {"action": argparse.BooleanOptionalAction} if field.type is bool else {}
        kind = kind or {"type": field.type}
        parser.add_argument("--" + field.name.replace("_", "-"), default=field.default, **kind)
    return train(Config(**vars(parser.parse_args(argv))))


# --8<-- [end:main]
if __name__ == "__main__":
    main()
