"""Train a small GPT on a text, one token per byte: `python train.py` on one process, or
`torchrun --standalone --nproc-per-node 2 train.py` on two (FSDP2). Needs Python 3.11 and
PyTorch 2.7 or later (and NumPy for checkpoints under torchrun), and a text: --data, by default
shakespeare.txt, served beside this file at https://gradient-flow.github.io/gradient-flow/train/
"""

import argparse
import dataclasses
import hashlib
import importlib.util
import json
import math
import os
import resource
import shutil
import signal
import threading
import time
import warnings
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn.functional as F
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

PRECISIONS = ("fp32", "bf16", "fp16", "bf16-pure")
CHECKPOINTING = ("none", "full", "selective")


def flag(default, help, choices=None, low=0):
    return dataclasses.field(default=default, metadata=dict(help=help, choices=choices, low=low))


@dataclasses.dataclass
class Config:
    data: str = flag("shakespeare.txt", "a text file; the last tenth is held out")
    n_layers: int = flag(4, "transformer blocks", low=1)
    hidden: int = flag(128, "width of the residual stream (a multiple of --n-heads)", low=1)
    n_heads: int = flag(4, "attention heads", low=1)
    seq_len: int = flag(128, "tokens per sequence", low=1)
    micro_batch: int = flag(8, "sequences per micro-batch on each process", low=1)
    accum_steps: int = flag(1, "micro-batches per optimizer step", low=1)
    steps: int = flag(200, "optimizer steps", low=1)
    lr: float = flag(3e-3, "peak learning rate", low=1e-12)
    warmup: int = flag(20, "steps of linear warmup, then cosine decay to lr/10")
    weight_decay: float = flag(0.1, "AdamW's decoupled weight decay, on matrices only")
    max_norm: float = flag(1.0, "clip the global gradient norm to this (0: no clipping)")
    precision: str = flag("bf16", "bf16-pure: no FP32 master weights", PRECISIONS)
    loss_scaling: bool = flag(True, "a GradScaler for fp16")
    checkpointing: str = flag("none", "activation checkpointing of each block", CHECKPOINTING)
    compile: bool = flag(False, "torch.compile each block")
    seed: int = flag(0, "initial weights and batch order")
    eval_every: int = flag(50, "steps between held-out evaluations (and the last)", low=1)
    print_every: int = flag(10, "steps between progress lines (0: none)")
    log_file: str = flag("", "a file to append each step to, as a line of JSON")
    peak_flops: float = flag(0.0, "one device's peak FLOP/s at --precision, for MFU (0: none)")
    ckpt_dir: str = flag("checkpoints", "checkpoint folder, shared by every process")
    save_every: int = flag(0, "steps between checkpoints (0: only when stopped early)")
    keep: int = flag(3, "complete checkpoints kept; older ones are deleted", low=1)
    resume: bool = flag(False, "continue from the newest complete checkpoint in --ckpt-dir")
    max_seconds: float = flag(0.0, "stop after this many seconds, and save (0: no limit)")
    max_bad_steps: int = flag(10, "fail after this many skipped steps in a row", low=1)

    def __post_init__(self):
        for f in dataclasses.fields(self):
            value, (_, choices, low) = getattr(self, f.name), f.metadata.values()
            say = f"Config: `{f.name}` (--{f.name.replace('_', '-')}) must be"
            if type(value) is not f.type and not (f.type is float and type(value) is int):
                raise TypeError(f"{say} a {f.type.__name__}, got {value!r}")
            if choices and value not in choices:
                raise ValueError(f"{say} one of {', '.join(choices)}; got {value!r}")
            if f.type in (int, float) and not (math.isfinite(value) and value >= low):
                raise ValueError(f"{say} finite and at least {low:g}, got {value!r}")
        if self.hidden % self.n_heads:
            raise ValueError(f"Config: --hidden {self.hidden} is no multiple of --n-heads")


class RunError(RuntimeError):
    """A run that must stop: the message says why and what to do."""


def ranks():  # (rank, world): under torchrun its process group's; alone, a world of one
    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


def collective(name, *args, **kwargs):  # torch.distributed's `name`; alone, nothing to exchange
    return getattr(dist, name)(*args, **kwargs) if dist.is_initialized() else None


def load_text(cfg):
    path = Path(cfg.data)
    if not path.is_absolute() and not path.exists():
        path = Path(__file__).resolve().parent / cfg.data  # beside train.py
    if not path.is_file():
        raise RunError(
            f"--data: no file {cfg.data!r} here or beside train.py. Pass --data PATH, or download "
            "the default: https://gradient-flow.github.io/gradient-flow/shakespeare.txt"
        )
    text = path.read_bytes()
    if len(text) < 10 * (cfg.seq_len + 2):  # the held-out tenth must hold a sequence
        raise RunError(f"--data: {path} has {len(text)} bytes, too few for --seq-len {cfg.seq_len}")
    data = torch.frombuffer(bytearray(text), dtype=torch.uint8).long()  # one token per byte
    split = int(0.9 * len(data))
    return data[:split], data[split:], hashlib.sha256(text).hexdigest()


def batch(data, cfg, step, micro, rank, world, device):
    g = torch.Generator().manual_seed(cfg.seed * 1_000_003 + step)
    n = cfg.accum_steps * world * cfg.micro_batch
    starts = torch.randint(len(data) - cfg.seq_len - 1, (n,), generator=g)
    first = (micro * world + rank) * cfg.micro_batch
    rows = [data[s : s + cfg.seq_len + 1] for s in starts[first : first + cfg.micro_batch]]
    tokens = torch.stack(rows).to(device)
    return tokens[:, :-1], tokens[:, 1:]  # inputs, and the next token of each as its target


@torch.no_grad()
def evaluate(model, data, cfg, low):
    (rank, world), device = ranks(), next(model.parameters()).device
    fixed = torch.Generator().manual_seed(0)  # the same 32 sequences for every run and seed
    n = max(32, world)  # sequences, split across the ranks
    starts = torch.randint(len(data) - cfg.seq_len - 1, (n,), generator=fixed)[rank::world]
    tokens = torch.stack([data[s : s + cfg.seq_len + 1] for s in starts]).to(device)
    with torch.autocast(device.type, dtype=low or torch.float32, enabled=low is not None):
        total = model(tokens[:, :-1], tokens[:, 1:]) * len(starts)
    collective("all_reduce", total)
    return total.item() / n


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, self.n_heads = cfg.hidden, cfg.n_heads
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.fc1, self.fc2 = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

    def forward(self, x):  # (batch, seq, hidden)
        b, s, h = x.shape
        qkv = self.qkv(self.ln1(x)).view(b, s, 3, self.n_heads, h // self.n_heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (batch, heads, seq, head size)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.wte = nn.Embedding(256, cfg.hidden)  # one token per byte
        self.wpe = nn.Embedding(cfg.seq_len, cfg.hidden)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.ln_f = nn.LayerNorm(cfg.hidden)

    def forward(self, idx, targets):  # token ids (batch, seq) -> mean cross-entropy in FP32
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.layers:
            x = block(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # the output head is the embedding
        return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


# --8<-- [start:init]
def init_weights(model, cfg, device):  # GPT-2's, the same on any number of processes
    g = torch.Generator(device).manual_seed(cfg.seed)
    for name, p in model.named_parameters():  # one whole parameter at a time, then its shard
        full = torch.zeros(p.shape, device=device)  # biases
        if p.dim() == 1 and not name.endswith("bias"):
            full.fill_(1.0)  # LayerNorm weights
        elif p.dim() == 2:  # the two projections into the residual stream scaled by 1/sqrt(2L)
            deep = name.endswith(("proj.weight", "fc2.weight"))
            full.normal_(0.0, 0.02 / math.sqrt(2 * cfg.n_layers) if deep else 0.02, generator=g)
        if isinstance(p, DTensor):
            full = distribute_tensor(full, p.device_mesh, p.placements)  # this rank's slice
        with torch.no_grad():
            p.copy_(full)


def build_model(cfg, world, device):
    with torch.device("meta"):  # shapes only, no memory
        model = GPT(cfg)
    if cfg.precision == "bf16-pure":
        model.to(torch.bfloat16)
    if cfg.checkpointing != "none":  # recompute each block's activations during backward
        keep = [torch.ops.aten.mm.default, torch.ops.aten.addmm.default]  # "selective" keeps these
        kw = {"context_fn": partial(create_selective_checkpoint_contexts, keep)}
        kw = kw if cfg.checkpointing == "selective" else {}
        for block in model.layers:
            block.forward = partial(checkpoint, block.forward, use_reentrant=False, **kw)
    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.precision)
    if world > 1:  # one process has nothing to shard: it trains the module as it is
        mesh = init_device_mesh(device.type, (world,))  # the ranks that share the model
        policy = MixedPrecisionPolicy(param_dtype=low, reduce_dtype=torch.float32)
        for module in (*model.layers, model):  # every block, then the rest (embeddings, ln_f)
            fully_shard(module, mesh=mesh, mp_policy=policy)
    model.to_empty(device=device)  # each rank allocates its shards, uninitialised
    init_weights(model, cfg, device)
    for block in model.layers if cfg.compile else []:
        block.compile()
    return model, low


# --8<-- [end:init]
# --8<-- [start:step]
def lr_at(cfg, taken):
    if taken < cfg.warmup:
        return cfg.lr * (taken + 1) / cfg.warmup
    progress = (taken - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
    return cfg.lr / 10 + 0.9 * cfg.lr * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))


def train_step(model, opt, scaler, data, cfg, step, taken, low):
    (rank, world), device = ranks(), next(model.parameters()).device
    lr = lr_at(cfg, taken)  # taken: the updates made so far, skipped steps not counted
    for group in opt.param_groups:
        group["lr"] = lr
    opt.zero_grad(set_to_none=True)
    total = torch.zeros((), device=device)
    for micro in range(cfg.accum_steps):
        if world > 1:  # reduce-scatter the gradients after the last micro-batch only
            model.set_requires_gradient_sync(micro == cfg.accum_steps - 1)
        x, y = batch(data, cfg, step, micro, rank, world, device)
        with torch.autocast(device.type, dtype=low or torch.float32, enabled=low is not None):
            loss = model(x, y) / cfg.accum_steps
        scaler.scale(loss).backward()
        total += loss.detach()
    scaler.unscale_(opt)
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_norm or math.inf)
    norm = norm.full_tensor() if isinstance(norm, DTensor) else norm  # over every rank's slice
    collective("all_reduce", total)
    loss, norm = torch.stack([total / world, norm.float()]).tolist()
    finite = math.isfinite(loss) and math.isfinite(norm)  # the same verdict on every rank
    scale = scaler.get_scale()  # 1.0 without a scaler
    if finite:
        scaler.step(opt)
    scaler.update()  # after an FP16 overflow, a lower scale; without a scaler, nothing
    record = dict(step=step, loss=loss, grad_norm=norm, lr=lr, loss_scale=scale)
    return record | dict(skipped=not finite, clipped=finite and 0 < cfg.max_norm < norm)


# --8<-- [end:step]
def complete(ckpt_dir):  # finished checkpoints, oldest first (a save renames its folder last)
    found = [p.parent for p in Path(ckpt_dir).glob("step-*/manifest.json")]
    return sorted((p for p in found if p.name[5:].isdigit()), key=lambda p: int(p.name[5:]))


def checksums(folder, names):  # each rank hashes its share of the files (dcp fsyncs them)
    rank, world = ranks()
    mine = {}
    for name in (n for n in names[rank::world] if (folder / n).is_file()):
        with open(folder / name, "rb") as f:
            mine[name] = hashlib.file_digest(f, "sha256").hexdigest()
    every = [mine] * world
    collective("all_gather_object", every, mine)
    return {name: digest for part in every for name, digest in part.items()}


def fsync(path):  # a file or a folder
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


# --8<-- [start:save]
def save(cfg, run_id, model, opt, scaler, step, counts):
    final = Path(cfg.ckpt_dir) / f"step-{step:06d}"
    tmp, rank = final.with_name(final.name + ".tmp"), ranks()[0]
    held = [*model.parameters(), *(s for st in opt.state.values() for s in st.values())]
    held = [t.to_local() if isinstance(t, DTensor) else t for t in held]  # this rank's slices
    bad = torch.tensor(float(not all(t.isfinite().all() for t in held)))
    collective("all_reduce", bad, op=dist.ReduceOp.MAX)
    if bad.item():
        raise RunError(f"step {step}: the model or AdamW holds inf or NaN; not saved")
    if rank == 0:
        shutil.rmtree(tmp, ignore_errors=True)  # what a save cut short left behind
    collective("barrier")
    model_state, optim_state = get_state_dict(model, opt)
    state = {"model": model_state, "optim": optim_state, "scaler": scaler.state_dict()}
    dcp.save(state, checkpoint_id=tmp)  # without a process group, this process alone
    files = checksums(tmp, sorted(os.listdir(tmp)))  # every rank's files are written by now
    if rank == 0:
        manifest = dict(step=step, counts=counts, run=run_id, files=files, torch=torch.__version__)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
        fsync(tmp / "manifest.json")
        fsync(tmp)
        shutil.rmtree(final, ignore_errors=True)  # the same step saved before
        os.replace(tmp, final)  # the save becomes complete at once
        fsync(final.parent)
        for old in complete(cfg.ckpt_dir)[: -cfg.keep]:
            shutil.rmtree(old)
    collective("barrier")
    return final


# --8<-- [end:save]
def load(cfg, run_id, model, opt, scaler):
    saved = complete(cfg.ckpt_dir)
    if not saved:
        raise RunError(f"--resume: {cfg.ckpt_dir!r} holds no complete checkpoint")
    path, before = saved[-1], saved[-2].name if len(saved) > 1 else "the start"
    try:
        manifest = json.loads((path / "manifest.json").read_text())
    except ValueError:  # flipped bits, or not text
        raise RunError(f"--resume: {path}/manifest.json is damaged; delete {path}") from None
    then = manifest["run"]
    if differ := sorted(k for k in run_id.keys() | then.keys() if run_id.get(k) != then.get(k)):
        was, now = (", ".join(f"{k} {d.get(k)!r}" for k in differ) for d in (then, run_id))
        raise RunError(
            f"--resume: {path} was saved by a run with {was}; this run has {now}. Resume with "
            "its settings, or start a new run in another --ckpt-dir"
        )
    files = checksums(path, sorted(manifest["files"]))
    if damaged := [n for n in sorted(manifest["files"]) if files.get(n) != manifest["files"][n]]:
        raise RunError(
            f"--resume: {path / damaged[0]} differs from the checksum recorded when it was "
            f"saved: the checkpoint is damaged. Delete {path} to resume from {before}"
        )
    model_state, optim_state = get_state_dict(model, opt)
    state = {"model": model_state, "optim": optim_state, "scaler": scaler.state_dict()}
    dcp.load(state, checkpoint_id=path)
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    scaler.load_state_dict(state["scaler"])
    return manifest["step"], manifest["counts"]


WARM_STEPS = 2  # a run's first steps (compilation, allocation) are not timed
# the fields a resumed run may change: they steer the run, not what it computes
STEERING = "data micro_batch accum_steps checkpointing compile eval_every print_every log_file"
STEERING += " peak_flops ckpt_dir save_every keep resume max_seconds max_bad_steps"


def train(cfg, stop=None):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":  # torchrun's LOCAL_RANK: this process's GPU on its node
        device = f"cuda:{os.environ.get('LOCAL_RANK', 0)}"
        torch.cuda.set_device(device)
    device, gpu = torch.device(device), device != "cpu"  # NCCL binds each rank to its GPU
    if "RANK" in os.environ:  # torchrun's, with the rendezvous; python train.py runs alone
        dist.init_process_group("nccl" if gpu else "gloo", device_id=device if gpu else None)
    try:
        with warnings.catch_warnings():  # dcp's notice that it works without a process group
            warnings.filterwarnings("ignore", "torch.distributed is disabled, unavailable")
            return run(cfg, device, stop or threading.Event())
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def append(path, record):  # one line of JSON, NaN and inf as null
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    finite = {k: None if v != v or v in (math.inf, -math.inf) else v for k, v in record.items()}
    with open(path, "a") as f:
        print(json.dumps(finite), file=f)


def run(cfg, device, stop):
    rank, world = ranks()
    train_data, val_data, text_sha256 = load_text(cfg)
    saves = dist.is_initialized() and (cfg.save_every or cfg.max_seconds or cfg.resume)
    if saves and not importlib.util.find_spec("numpy"):
        raise RunError("checkpoints under torchrun need NumPy: pip install numpy")
    model, low = build_model(cfg, world, device)
    params = list(model.parameters())  # weight decay on the matrices, not on biases or LayerNorms
    groups = [{"params": [p for p in params if p.dim() >= 2]}]
    groups += [{"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, cfg.lr, weight_decay=cfg.weight_decay, fused=True)
    scaler = torch.amp.GradScaler(device.type, enabled=cfg.precision == "fp16" and cfg.loss_scaling)
    run_id = {k: v for k, v in dataclasses.asdict(cfg).items() if k not in STEERING.split()}
    run_id |= dict(sequences_per_step=cfg.accum_steps * world * cfg.micro_batch, text=text_sha256)
    start, counts = 0, dict(taken=0, skipped=0, clipped=0)
    if cfg.resume:
        start, counts = load(cfg, run_id, model, opt, scaler)
        if rank == 0 and start == cfg.steps:
            print(f"the run in {cfg.ckpt_dir} finished at step {start}: nothing to train")
    elif complete(cfg.ckpt_dir):
        raise RunError(f"{cfg.ckpt_dir} holds checkpoints: --resume, or use another --ckpt-dir")
    tokens = cfg.accum_steps * world * cfg.micro_batch * cfg.seq_len  # per step
    h, n = cfg.hidden, cfg.n_layers  # FLOPs per token: 6 per matrix weight, attention in full
    flops = 6 * (12 * n * h * h + 256 * h) + 12 * n * cfg.seq_len * h
    log, in_a_row, t0, times, since = [], 0, time.perf_counter(), [], 0
    for step in range(start, cfg.steps):
        t = time.perf_counter()
        record = train_step(model, opt, scaler, train_data, cfg, step, counts["taken"], low)
        counts = {k: v + record.get(k, not record["skipped"]) for k, v in counts.items()}
        in_a_row = in_a_row + 1 if record["skipped"] else 0
        halt = torch.tensor([float(0 < cfg.max_seconds < time.perf_counter() - t0), stop.is_set()])
        collective("all_reduce", halt, op=dist.ReduceOp.MAX)  # one decision for every rank
        last = step == cfg.steps - 1 or halt.any().item()
        times += [time.perf_counter() - t] if step >= start + WARM_STEPS else []  # no eval, save
        if (step + 1) % cfg.eval_every == 0 or last:
            record["val_loss"] = evaluate(model, val_data, cfg, low)
        shown = cfg.print_every and (step % cfg.print_every == 0 or "val_loss" in record)
        if shown and times[since:]:  # steady tokens/s since the last progress line
            record["tokens_per_s"] = tokens * len(times[since:]) / sum(times[since:])
            if cfg.peak_flops:
                record["mfu"] = record["tokens_per_s"] * flops / world / cfg.peak_flops
            since = len(times)
        log.append(record)
        if cfg.log_file and rank == 0:
            append(cfg.log_file, record)
        if shown and rank == 0:
            line = {k: v for k, v in record.items() if type(v) is not bool} | counts
            print(", ".join(f"{k} {v:.6g}" for k, v in line.items() if k != "taken"), flush=True)
        if in_a_row >= cfg.max_bad_steps:
            raise RunError(
                f"step {step}: {in_a_row} steps in a row had an inf or NaN loss or gradient and "
                "were skipped (--max-bad-steps). Lower --lr, or resume from the last checkpoint"
            )
        early = last and step < cfg.steps - 1
        if early or (cfg.save_every and ((step + 1) % cfg.save_every == 0 or last)):
            path = save(cfg, run_id, model, opt, scaler, step + 1, counts)
            if rank == 0 and early:
                why = "SIGTERM" if halt[1] else "--max-seconds"
                print(f"stopped after step {step} ({why}): saved {path}; continue with --resume")
        if last:
            break
    if world > 1:
        model.reshard()  # this rank's shards only (evaluation left the root's parameters gathered)
    states = [s for p in params for s in opt.state[p].values() if s.dim() > 0]
    grads = [p.grad for p in params if p.grad is not None]  # none when resumed at the end
    held = [
        sum((t.to_local() if isinstance(t, DTensor) else t).nbytes for t in ts)
        for ts in (params, grads, states)  # this rank's slices
    ]
    speed = tokens * len(times) / sum(times) if times else None  # steady tokens/s
    mfu = speed * flops / world / cfg.peak_flops if speed and cfg.peak_flops else None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10  # MiB resident (Linux: KiB)
    peak = torch.cuda.max_memory_allocated(device) >> 20 if device.type == "cuda" else peak
    summary = dict(rank=rank, world=world, held_bytes=held, peak_mib=peak)
    summary |= dict(counts, tokens_per_s=speed, mfu=mfu)
    if cfg.log_file and rank == 0:
        append(cfg.log_file, summary)
    for r in range(world):  # one rank after the other, so that their lines do not interleave
        if r == rank and cfg.print_every:
            print(f"rank {rank}/{world}: {held} B of params, grads, AdamW states; peak {peak} MiB")
        collective("barrier")
    if rank == 0 and cfg.print_every and speed:
        mfu_text = f", MFU {mfu:.1%}" if mfu else ""  # where --peak-flops was given
        print(f"steps after the first {WARM_STEPS}: {speed:,.0f} tokens/s{mfu_text}")
    return summary | {"log": log}


# --8<-- [start:main]
def main(argv=None):
    formatter = argparse.ArgumentDefaultsHelpFormatter  # --help gives each flag's default
    parser = argparse.ArgumentParser("train.py", description=__doc__, formatter_class=formatter)
    for f in dataclasses.fields(Config):
        how = {"action": argparse.BooleanOptionalAction} if f.type is bool else {"type": f.type}
        name, (help, choices, _) = "--" + f.name.replace("_", "-"), f.metadata.values()
        parser.add_argument(name, default=f.default, help=help, choices=choices, **how)
    try:
        cfg = Config(**vars(parser.parse_args(argv)))
    except (TypeError, ValueError) as err:
        parser.error(str(err))
    stop = threading.Event()  # SIGTERM, a scheduler's notice: save, then exit
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    try:
        return train(cfg, stop)
    except RunError as err:
        raise SystemExit(f"train.py: {err}") from None


# --8<-- [end:main]
if __name__ == "__main__":
    main()
