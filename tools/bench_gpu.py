"""Measure the training step, FP8 training, train.py and checkpointing on one device.

    python -m tools.bench_gpu [--device cuda|cpu] [--quick] [--out results/] [--wheels wheels/]
    python -m tools.bench_gpu --stage-wheels wheels/     # where PyPI is reachable (make gpu-wheels)

Writes results/bench-<device>.json with the device, the versions and the date, after every
section (a run stopped half-way keeps what it measured), for docs/checkpointing.md,
docs/pipeline.md, docs/memory.md, docs/hardware.md and docs/cheatsheet.md. Sections: the MLP
checkpointing sweep; the training step in five precisions, each with the GPT's written-out
attention and with F.scaled_dot_product_attention (ms per step, tokens/s, MFU against the
datasheet's dense BF16 peak, peak memory); checkpointing the GPT, eager and under torch.compile;
FP8 training with torchao (tensorwise and rowwise) against BF16; snippets/train.py as a
subprocess with --compile off and on, its loss beside a CPU run of the same seed; FP16 against
BF16 from the same start; one step's memory timeline; the suite's `cuda`-marked tests.
A host without network gets torchao from --wheels (staged by --stage-wheels); without it the
FP8 section is skipped with the reason. `--quick` runs every section at a tiny size, in seconds
on a CPU. Committed results/bench-*.json files ship inside gradflow_ref (gradflow_ref/committed
links to results/) and are read by gradflow_ref.benchmarks.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import fnmatch
import gc
import importlib
import importlib.metadata
import json
import math
import os
import pickle
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts
from torch.utils.checkpoint import checkpoint_sequential as torch_checkpoint_sequential

from gradflow_ref.checkpointing import checkpoint_sequential, measure, mlp, segment_model
from gradflow_ref.hardware import GPUS
from gradflow_ref.memory import GPT, MemoryConfig, parameter_count, training_memory
from gradflow_ref.pipeline import PipelineConfig, Trainer
from gradflow_ref.transformer import get_batch, shakespeare

__all__ = [
    "SIZES",
    "Size",
    "GPU_WHEELS",
    "flops_per_token",
    "stated_peak",
    "mfu",
    "checkpoint_sweep",
    "training_step",
    "gpt_checkpointing",
    "fp8_training",
    "train_script",
    "fp16_run",
    "memory_timeline",
    "memory_check",
    "cuda_tests",
    "cuda_test_files",
    "stage_wheels",
    "install_wheels",
    "versions",
    "main",
]

ROOT = Path(__file__).resolve().parents[1]
TRAIN_SCRIPT = ROOT / "snippets" / "train.py"
# what the GPU host needs beyond torch, as "name==version pattern": torchao's FP8 training
GPU_WHEELS = ("torchao==0.18.*",)
# the selective policy keeps the linear layers' outputs; attention's batched products, softmax
# and every element-wise op are recomputed (Korthikanti et al. 2022's selective recomputation)
SAVED_OPS = [torch.ops.aten.mm.default, torch.ops.aten.addmm.default]
ATTENTIONS = {  # how a block computes attention -> the row-name suffix of its training-step rows
    "unfused": "",
    "sdpa": "_sdpa",
}
FP8_RECIPES = ("tensorwise", "rowwise")  # torchao's Float8LinearConfig.from_recipe_name


@dataclass(frozen=True)
class Size:
    mlp: tuple[int, int, int]  # (layers, width, batch) of the MLP checkpointing sweep
    gpt: dict  # MemoryConfig fields of the GPT the step and checkpointing runs use
    steps: int  # timed optimizer steps per variant (median reported), after 3 warm-up steps
    train_steps: int  # optimizer steps of the FP16/BF16 training runs
    compile: str  # torch.compile backend of the compiled checkpointing rows
    fp8_gpt: dict  # MemoryConfig fields of the GPT trained in BF16 and FP8 (Shakespeare bytes)
    fp8_steps: int  # optimizer steps of each FP8/BF16 run (AdamW, warmup, then constant lr)
    fp8_compile: str | None  # torch.compile backend of the FP8/BF16 runs; None: eager
    script: dict  # train.py flags (without "--") that set its model and batch
    script_steps: int  # optimizer steps of each train.py run on the measured device
    agree_steps: int  # first steps whose loss is compared with a CPU run of train.py
    fp8_lr: float = 3e-4  # peak learning rate of the FP8/BF16 runs
    fp8_warmup: int = 30  # linear warmup steps of the FP8/BF16 runs
    script_seconds: float = 120.0  # --max-seconds of each train.py run (a guard)
    script_compile: bool = True  # also run train.py --compile (most of a minute on a CPU)
    timed_from: float = 1 / 3  # fraction of a run's steps before its steady-state timing starts


SIZES = {
    "cuda": Size(
        (64, 2048, 1024),
        dict(n_layers=16, hidden=1024, n_heads=16, seq_len=1024, micro_batch=8, vocab=32768),
        10,
        60,
        compile="inductor",
        fp8_gpt=dict(n_layers=8, hidden=2048, n_heads=16, seq_len=1024, micro_batch=8, vocab=256),
        fp8_steps=300,
        fp8_compile="inductor",
        script=dict(n_layers=6, hidden=384, n_heads=6, seq_len=512, micro_batch=16),
        script_steps=200,
        agree_steps=8,
    ),
    "cpu": Size(
        (64, 128, 128),
        dict(n_layers=4, hidden=128, n_heads=4, seq_len=128, micro_batch=4, vocab=512),
        5,
        30,
        compile="inductor",
        fp8_gpt=dict(n_layers=2, hidden=128, n_heads=4, seq_len=128, micro_batch=4, vocab=256),
        fp8_steps=30,
        fp8_compile=None,  # compiling FP8 on a CPU takes longer than the runs
        script=dict(n_layers=2, hidden=64, n_heads=2, seq_len=64, micro_batch=8),
        script_steps=30,
        agree_steps=8,
        fp8_warmup=5,
    ),
    "quick": Size(
        (8, 32, 16),
        dict(n_layers=4, hidden=32, n_heads=2, seq_len=16, micro_batch=2, vocab=64),
        2,
        4,
        compile="aot_eager",  # traces and partitions like inductor, without generating code
        fp8_gpt=dict(n_layers=2, hidden=32, n_heads=2, seq_len=16, micro_batch=2, vocab=256),
        fp8_steps=6,
        fp8_compile=None,
        script=dict(n_layers=2, hidden=32, n_heads=2, seq_len=32, micro_batch=4),
        script_steps=6,
        agree_steps=4,
        fp8_warmup=2,
        script_seconds=60.0,
        script_compile=False,
    ),
}


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _reset_peak(device):
    if device.type == "cuda":
        gc.collect()  # the previous variant's model and optimizer
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _allocated(device):
    return torch.cuda.memory_allocated(device) if device.type == "cuda" else None


def _peak(device):
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None


def _seconds(run, device, repeats):
    """Median wall seconds of `repeats` calls of `run`, synchronised around each."""
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        run()
        _sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# ------------------------------------------------------------------ model FLOPs and MFU


def flops_per_token(gpt: dict) -> float:
    """Model FLOPs of one trained token (forward and backward) of a GPT of shape `gpt`.

    6 per weight of every matrix product (12·h² per block, h·V in the tied output head), plus
    12·L·s·h for attention's two batched products, counted without the causal mask's saving
    (Chowdhery et al. 2022, PaLM, appendix B). Biases, norms and the softmax are not counted.

    Args:
        gpt: n_layers (L), hidden (h), seq_len (s) and vocab (V).
    """
    layers, h, s, v = gpt["n_layers"], gpt["hidden"], gpt["seq_len"], gpt["vocab"]
    return 6 * (12 * layers * h * h + h * v) + 12 * layers * s * h


def stated_peak(device_name: str) -> dict | None:
    """The datasheet's dense BF16 peak of the GPU torch calls `device_name`, or None.

    Only parts whose datasheet gradflow_ref.hardware holds are matched: the H100 SXM
    ("NVIDIA H100 80GB HBM3"), the H200 SXM ("NVIDIA H200") and the A100 SXM ("...SXM4-80GB").
    PCIe and NVL parts have lower peaks and are not matched: pass --peak-tflops for them.
    """
    name = device_name.upper()
    card = None
    if "H100" in name and ("HBM3" in name or "SXM" in name):
        card = "H100 SXM"
    elif "H200" in name and "NVL" not in name:
        card = "H200 SXM"
    elif "A100" in name and "SXM" in name and "80GB" in name:
        card = "A100 80GB SXM"
    if card is None:
        return None
    return {
        "card": card,
        "bf16_flops": GPUS[card].tflops["bf16"] * 1e12,
        "source": GPUS[card].source,
    }


def mfu(tokens_per_second: float, per_token: float, peak: dict | None) -> float | None:
    """Model FLOPs utilisation: the model FLOP/s a run achieved over the stated BF16 peak."""
    if peak is None or not tokens_per_second:
        return None
    return tokens_per_second * per_token / peak["bf16_flops"]


def _utilisation(row: dict, per_token: float, peak: dict | None) -> dict:
    if "error" in row or "tokens_per_second" not in row:
        return {}
    return {
        "model_flops_per_second": row["tokens_per_second"] * per_token,
        "mfu": mfu(row["tokens_per_second"], per_token, peak),
    }


# ------------------------------------------------------------------ the MLP sweep (chapter 6)


def checkpoint_sweep(device, size: Size, repeats=9) -> dict:
    """Saved bytes, CUDA peak, recomputed forwards and time of each segment count on an MLP."""
    n, width, batch = size.mlp
    net = mlp(n, width, device=device)
    x = torch.randn(batch, width, device=device)
    unit = batch * width * 4  # bytes of one layer's output
    rows = []
    net(x).sum().backward()  # lazy set-up (the CUDA BLAS workspace) stays out of the first peak
    for segments in (s for s in (1, 2, 4, 8, 16, 32, 64) if s <= n):
        run = partial(checkpoint_sequential, net, segments, x)
        stats = measure(run, net)  # also warms up
        ref = measure(
            partial(torch_checkpoint_sequential, net, segments, x, use_reentrant=False), net
        )
        rows.append(
            {
                "segments": segments,
                "k": n // segments,
                "saved_bytes": stats.saved_bytes,
                "saved_activations": stats.saved_bytes / unit,
                "model_activations": segment_model(n, n // segments),
                "torch_saved_bytes": ref.saved_bytes,
                "peak_bytes": stats.peak_bytes,
                "torch_peak_bytes": ref.peak_bytes,
                "recomputed": stats.recomputed,
                "seconds": _seconds(lambda r=run: r().sum().backward(), device, repeats),
            }
        )
    plain = rows[0]
    best = min(rows, key=lambda r: r["saved_bytes"])
    return {
        "n_layers": n,
        "width": width,
        "batch": batch,
        "rows": rows,
        "torch_equal": all(r["saved_bytes"] == r["torch_saved_bytes"] for r in rows),
        "best_k": best["k"],
        "saving_at_best": plain["saved_bytes"] / best["saved_bytes"],
        "time_ratio_at_best": best["seconds"] / plain["seconds"],
    }


# ------------------------------------------------------------------ the GPT and its training step


class _Embed(nn.Module):
    def __init__(self, gpt: GPT):
        super().__init__()
        self.wte, self.wpe = gpt.wte, gpt.wpe

    def forward(self, idx):  # (b, s) int64 -> (b, s, h)
        return self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))


class _Logits(nn.Module):
    def __init__(self, gpt: GPT):
        super().__init__()
        self.ln_f, self.wte = gpt.ln_f, gpt.wte  # the head shares the token embedding

    def forward(self, x):  # (b, s, h) -> (b, s, vocab)
        return F.linear(self.ln_f(x), self.wte.weight)


class _SdpaBlock(nn.Module):
    """A gradflow_ref.memory.GPT block, its own weights, attention through one fused call."""

    def __init__(self, block: nn.Module):
        super().__init__()
        self.n_heads = block.n_heads
        self.ln1, self.qkv, self.proj = block.ln1, block.qkv, block.proj
        self.ln2, self.fc1, self.fc2 = block.ln2, block.fc1, block.fc2

    def forward(self, x):  # x: (b, s, h)
        b, s, h = x.shape
        heads = (b, s, self.n_heads, h // self.n_heads)
        q, k, v = (t.view(heads).transpose(1, 2) for t in self.qkv(self.ln1(x)).split(h, -1))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (b, a, s, d)
        x = x + self.proj(y.transpose(1, 2).reshape(b, s, h))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class _Checkpointed(nn.Module):
    """`block` recomputed during backward: all of it, or all but SAVED_OPS' outputs."""

    def __init__(self, block: nn.Module, selective: bool):
        super().__init__()
        self.block, self.selective = block, selective

    def forward(self, x):
        if self.selective:
            context = partial(create_selective_checkpoint_contexts, SAVED_OPS)
            return checkpoint(self.block, x, use_reentrant=False, context_fn=context)
        return checkpoint(self.block, x, use_reentrant=False)


def gpt_model(cfg: MemoryConfig, device, seed=0, attention="unfused") -> nn.Sequential:
    """gradflow_ref.memory.GPT (no dropout) as an nn.Sequential: embed, blocks, logits.

    attention "sdpa" runs each block's attention through F.scaled_dot_product_attention, with
    the same weights (the same seed gives the same model).
    """
    if attention not in ATTENTIONS:
        raise ValueError(
            f"gpt_model: `attention` must be one of {list(ATTENTIONS)}, got {attention!r}."
        )
    torch.manual_seed(seed)
    with torch.device(device):  # drawn where it trains: a CPU takes seconds for 236M weights
        gpt = GPT(cfg, dropout=0.0)
        for table in (gpt.wte, gpt.wpe):  # GPT-2's 0.02: unit-scale logits from the tied head
            nn.init.normal_(table.weight, std=0.02)
    blocks = [_SdpaBlock(b) if attention == "sdpa" else b for b in gpt.layers]
    return nn.Sequential(_Embed(gpt), *blocks, _Logits(gpt))


def _loss_fn(logits, targets):  # FP32 mean cross-entropy over every token
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


def _batch(cfg: MemoryConfig, device, seed):
    """Token sequences that count up by a per-sequence stride modulo 256 (or the vocabulary):
    the model can learn the next token from the two before it."""
    gen = torch.Generator().manual_seed(seed)
    b, s, v = cfg.micro_batch, cfg.seq_len, min(cfg.vocab, 256)
    start = torch.randint(0, v, (b, 1), generator=gen)
    stride = torch.randint(1, 9, (b, 1), generator=gen)
    seq = (start + stride * torch.arange(s + 1)) % v
    return seq[:, :-1].to(device), seq[:, 1:].to(device)


def _layers(blocks, mode, segments, backend):
    """Callables that take the blocks' input in turn: checkpointing `mode` (none, block, sqrt,
    selective) applied, each compiled with `backend` (None: eager; sqrt is never compiled)."""
    if mode == "sqrt":
        seq = nn.Sequential(*blocks)
        return [partial(torch_checkpoint_sequential, seq, segments, use_reentrant=False)]
    if mode in ("block", "selective"):
        blocks = [_Checkpointed(b, selective=mode == "selective") for b in blocks]
    if backend:
        for b in blocks:  # one block's code, compiled once and reused by the others
            b.compile(backend=backend)
    return list(blocks)


def _float8(model: nn.Module, recipe: str, emulate: bool = False) -> list[str]:
    """Swap `model`'s nn.Linear layers for torchao's Float8Linear; return the swapped names.

    emulate: round to FP8 as the recipe does, but multiply in FP32 (torchao's emulation, for a
    CPU, whose torch._scaled_mm is a slow reference kernel).
    """
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    def fits(module, fqn):  # FP8 matrix products need both dimensions divisible by 16
        return module.in_features % 16 == 0 and module.out_features % 16 == 0

    before = {n for n, m in model.named_modules() if isinstance(m, nn.Linear)}
    config = dataclasses.replace(Float8LinearConfig.from_recipe_name(recipe), emulate=emulate)
    convert_to_float8_training(model, config=config, module_filter_fn=fits)
    after = {n for n, m in model.named_modules() if type(m) is nn.Linear}
    return sorted(before - after)


class _Plain:
    """The step a reader writes: optional autocast (and GradScaler), clip, fused AdamW.

    Optionally: attention through SDPA, torchao's FP8 linear layers (`float8`, a recipe name),
    each block compiled with `compile` (a backend name), and a linear warmup of `warmup` steps.
    """

    def __init__(
        self,
        cfg,
        device,
        dtype=None,
        mode="none",
        scaler=False,
        attention="unfused",
        compile=None,
        float8=None,
        lr=1e-3,
        warmup=1,
    ):
        self.model = gpt_model(cfg, device, attention=attention)
        self.device, self.dtype = device, dtype
        emulate = device.type != "cuda"
        self.converted = _float8(self.model, float8, emulate) if float8 else []
        self.embed, *blocks, self.head = self.model
        segments = max(1, round(math.sqrt(cfg.n_layers)))
        self.layers = _layers(blocks, mode, segments, compile)
        self.opt = torch.optim.AdamW(
            self.model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1, fused=True
        )
        ramp = lambda step: min(1.0, (step + 1) / warmup)  # noqa: E731  linear warmup, then flat
        self.schedule = torch.optim.lr_scheduler.LambdaLR(self.opt, ramp)
        self.scaler = torch.amp.GradScaler(device.type, enabled=scaler)
        self.skipped = 0

    def forward(self, idx, targets):
        amp = self.dtype is not None
        with torch.autocast(self.device.type, dtype=self.dtype or torch.bfloat16, enabled=amp):
            x = self.embed(idx)
            for layer in self.layers:
                x = layer(x)
            return _loss_fn(self.head(x), targets)

    def step(self, batch):
        loss = self.forward(*batch)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.opt)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        scale = self.scaler.get_scale()
        self.scaler.step(self.opt)
        self.scaler.update()
        self.schedule.step()
        self.skipped += int(self.scaler.is_enabled() and self.scaler.get_scale() < scale)
        self.opt.zero_grad(set_to_none=True)
        return loss.item()


class _Ref:
    """gradflow_ref.pipeline.Trainer: BF16 model, FP32 master weights, one micro-batch."""

    def __init__(self, cfg, device, attention="unfused"):
        pipe = PipelineConfig(lr=1e-3, warmup_steps=1, total_steps=10**6, max_norm=1.0)
        model = gpt_model(cfg, device, attention=attention)
        self.trainer = Trainer(model, pipe, loss_fn=_loss_fn)
        self.model = self.trainer.model

    def forward(self, idx, targets):
        return _loss_fn(self.model(idx.to(self.trainer.device)), targets)

    def step(self, batch):
        return self.trainer.step([batch]).loss  # a float


VARIANTS = {  # name -> (how to build the step, what it is)
    "fp32": (partial(_Plain, dtype=None), "FP32 parameters and matmuls, fused AdamW"),
    "tf32": (partial(_Plain, dtype=None), "FP32 parameters, TF32 matmuls, fused AdamW"),
    "autocast_bf16": (
        partial(_Plain, dtype=torch.bfloat16),
        "torch.autocast(bfloat16), FP32 parameters, fused AdamW",
    ),
    "trainer_bf16": (_Ref, "gradflow_ref Trainer: BF16 weights, FP32 masters, AdamW"),
    "autocast_fp16": (
        partial(_Plain, dtype=torch.float16, scaler=True),
        "torch.autocast(float16) + torch.amp.GradScaler, FP32 parameters, fused AdamW",
    ),
}
CHECKPOINT_MODES = {
    "none": "no checkpointing",
    "block": "checkpoint(block, x) around every block",
    "sqrt": "checkpoint_sequential, sqrt(N) segments",
    "selective": "every block, selective: linear-layer outputs saved, the rest recomputed",
}
COMPILED_MODES = ("none", "block", "selective")  # rows "<mode>_compiled": each block compiled


def _time_step(make, cfg, device, steps, precision="highest") -> dict:
    """Build a step, warm it up, then time `steps` steps; memory as the step holds it.

    An error (out of memory, say) is returned as {"error": ...} so the other variants still run.
    """
    torch.set_float32_matmul_precision(precision)
    try:
        runner = make(cfg, device)
        batch = _batch(cfg, device, seed=1)
        for _ in range(3):  # a compiled step compiles here
            runner.step(batch)
        _sync(device)
        _reset_peak(device)
        state = _allocated(device)  # weights, masters and optimizer states; no gradients
        loss = runner.forward(*batch)  # what backward keeps: activations (and the logits)
        _sync(device)
        held = None if state is None else _allocated(device) - state
        del loss
        seconds = _seconds(partial(runner.step, batch), device, steps)
        tokens = cfg.micro_batch * cfg.seq_len
        out = {
            "step_seconds": seconds,
            "tokens_per_second": tokens / seconds,
            "peak_bytes": _peak(device),
            "state_bytes": state,
            "forward_held_bytes": held,
        }
        if getattr(runner, "skipped", None) is not None:
            out["skipped_steps"] = runner.skipped
        return out
    except Exception:  # noqa: BLE001
        print(traceback.format_exc(), file=sys.stderr)
        return {"error": traceback.format_exc(limit=-3)}
    finally:
        torch.set_float32_matmul_precision("highest")
        _reset_peak(device)


def training_step(device, size: Size, peak: dict | None = None) -> dict:
    """Step time, tokens/s, MFU and memory of each precision, written-out and SDPA attention."""
    cfg = MemoryConfig(dropout=False, **size.gpt)
    per_token = flops_per_token(size.gpt)
    rows = {}
    for attention, suffix in ATTENTIONS.items():
        for name, (make, what) in VARIANTS.items():
            precision = "high" if name == "tf32" else "highest"
            kind = "; attention through F.scaled_dot_product_attention" if suffix else ""
            row = {"what": what + kind, "attention": attention}
            row |= _time_step(
                partial(make, attention=attention), cfg, device, size.steps, precision
            )
            rows[name + suffix] = row | _utilisation(row, per_token, peak)
    return {
        "rows": rows,
        "tokens_per_step": cfg.micro_batch * cfg.seq_len,
        "flops_per_token": per_token,
    }


def gpt_checkpointing(device, size: Size, peak: dict | None = None) -> dict:
    """Peak memory and step time of each checkpointing mode (BF16 autocast, FP32 params), eager
    and with every block compiled."""
    cfg = MemoryConfig(dropout=False, **size.gpt)
    per_token = flops_per_token(size.gpt)
    rows = {}
    for mode, what in CHECKPOINT_MODES.items():
        make = partial(_Plain, dtype=torch.bfloat16, mode=mode)
        rows[mode] = {"what": what} | _time_step(make, cfg, device, size.steps)
    for mode in COMPILED_MODES:
        make = partial(_Plain, dtype=torch.bfloat16, mode=mode, compile=size.compile)
        what = f"{CHECKPOINT_MODES[mode]}; each block under torch.compile ({size.compile})"
        rows[f"{mode}_compiled"] = {"what": what} | _time_step(make, cfg, device, size.steps)
        torch.compiler.reset()  # this variant's compiled code and guards go with it
    for row in rows.values():
        row |= _utilisation(row, per_token, peak)
    segments = max(1, round(math.sqrt(cfg.n_layers)))
    return {"rows": rows, "segments": segments, "compile": size.compile}


# ------------------------------------------------------------------ FP8 training (torchao)


def _torchao_version() -> str | None:
    try:
        return importlib.metadata.version("torchao")
    except importlib.metadata.PackageNotFoundError:
        return None


def _curve(runner, cfg, device, data, steps, warm, peak, per_token) -> dict:
    """Train `steps` steps on Shakespeare windows (the same for every runner); per-step loss,
    median step time after `warm` steps, and the peak memory of those steps."""
    gen = torch.Generator().manual_seed(1234)
    losses, times = [], []
    for step in range(steps):
        if step == warm:
            _reset_peak(device)
        x, y = get_batch(data, cfg.micro_batch, cfg.seq_len, gen)
        _sync(device)
        start = time.perf_counter()
        losses.append(runner.step((x.to(device), y.to(device))))  # .item() waits for the GPU
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times[warm:])
    tokens = cfg.micro_batch * cfg.seq_len / seconds
    tail = losses[-max(1, steps // 10) :]
    return {
        "step_seconds": seconds,
        "first_step_seconds": times[0],  # with torch.compile: the compilation
        "tokens_per_second": tokens,
        "mfu": mfu(tokens, per_token, peak),
        "peak_bytes": _peak(device),
        "losses": losses,
        "final_loss": sum(tail) / len(tail),  # mean of the last tenth of the steps
    }


def fp8_training(device, size: Size, peak: dict | None = None) -> dict:
    """Train one GPT from the same start in BF16 autocast and with torchao's FP8 linear layers
    (tensorwise, rowwise): step time, tokens/s, MFU, peak memory and the loss of every step.

    Skipped, with the reason, when torchao cannot be imported.
    """
    try:
        importlib.import_module("torchao.float8")
    except ImportError as err:
        return {
            "skipped": f"torchao is not importable ({err}); stage its wheel with `make "
            f"gpu-wheels` and pass `--wheels wheels` (FP8 training needs {GPU_WHEELS[0]})"
        }
    cfg = MemoryConfig(dropout=False, **size.fp8_gpt)
    per_token = flops_per_token(size.fp8_gpt)
    data = shakespeare()
    warm = min(size.fp8_steps - 1, max(3, size.fp8_steps // 10))
    runs = {}
    for name in ("bf16", *FP8_RECIPES):
        try:
            runner = _Plain(
                cfg,
                device,
                dtype=torch.bfloat16,
                attention="sdpa",
                compile=size.fp8_compile,
                float8=None if name == "bf16" else name,
                lr=size.fp8_lr,
                warmup=size.fp8_warmup,
            )
            runs[name] = {"converted": runner.converted} | _curve(
                runner, cfg, device, data, size.fp8_steps, warm, peak, per_token
            )
        except Exception:  # noqa: BLE001
            print(traceback.format_exc(), file=sys.stderr)
            runs[name] = {"error": traceback.format_exc(limit=-3)}
        finally:
            runner = None
            if size.fp8_compile:
                torch.compiler.reset()
            _reset_peak(device)
    return {
        "torchao": _torchao_version(),
        "gpt": size.fp8_gpt | {"n_params": parameter_count(cfg), "attention": "sdpa"},
        "data": "Shakespeare bytes (gradflow_ref/data/shakespeare.txt), random windows, one "
        "token per byte; the same windows in every run",
        "optimizer": f"AdamW(betas=(0.9, 0.95), weight_decay=0.1, fused=True), lr {size.fp8_lr} "
        f"after {size.fp8_warmup} warmup steps, clip 1.0",
        "precision": "torch.autocast(bfloat16), FP32 parameters; FP8 runs swap every nn.Linear "
        "with both dimensions divisible by 16 (the tied output head is F.linear, not swapped)",
        "compile": size.fp8_compile,
        "matmul": "torch._scaled_mm (FP8 tensor cores)"
        if device.type == "cuda"
        else "emulated: "
        "FP8 rounding, FP32 products (torchao's emulate=True; a CPU has no FP8 matmul)",
        "steps": size.fp8_steps,
        "timed_after": warm,
        "flops_per_token": per_token,
        "runs": runs,
    }


def fp16_run(device, size: Size) -> dict:
    """Train the GPT from the same start in FP16 + GradScaler and in BF16; losses and skips."""
    cfg = MemoryConfig(dropout=False, **size.gpt)
    out = {"steps": size.train_steps}
    for name, dtype, scaler in (("fp16", torch.float16, True), ("bf16", torch.bfloat16, False)):
        runner = _Plain(cfg, device, dtype=dtype, scaler=scaler)
        losses, scales = [], []
        for step in range(size.train_steps):
            losses.append(runner.step(_batch(cfg, device, seed=100 + step)))
            scales.append(runner.scaler.get_scale() if scaler else 1.0)
        out[name] = {
            "losses": losses,
            "final_loss": losses[-1],
            "skipped_steps": runner.skipped,
            "scales": scales,
        }
    return out


def memory_timeline(device, size: Size, points=400, snapshot=None) -> dict | None:
    """Allocated bytes over one autocast step, from the CUDA caching allocator's trace.

    Returns None off CUDA (torch.cuda.memory._record_memory_history needs it). Phases are the
    trace positions where forward, backward and the optimizer step begin and the step ends.
    """
    if device.type != "cuda":
        return None
    cfg = MemoryConfig(dropout=False, **size.gpt)
    runner = _Plain(cfg, device, dtype=torch.bfloat16)
    batch = _batch(cfg, device, seed=1)
    for _ in range(2):
        runner.step(batch)  # optimizer states exist; gradients are None
    _sync(device)
    base = torch.cuda.memory_allocated(device)
    marks = {}

    def mark(name):
        _sync(device)
        marks[name] = len(torch.cuda.memory._snapshot()["device_traces"][device.index])

    torch.cuda.memory._record_memory_history(stacks="python", max_entries=1_000_000)
    try:
        mark("forward")
        loss = runner.forward(*batch)
        mark("backward")
        loss.backward()
        mark("optimizer")
        torch.nn.utils.clip_grad_norm_(runner.model.parameters(), 1.0)
        runner.opt.step()
        runner.opt.zero_grad(set_to_none=True)
        del loss
        mark("end")
        snap = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    if snapshot:
        Path(snapshot).write_bytes(pickle.dumps(snap))
    trace = snap["device_traces"][device.index]
    level, levels = base, []
    for event in trace:
        if event["action"] == "alloc":
            level += event["size"]
        elif event["action"] == "free_completed":
            level -= event["size"]
        levels.append(level)
    width = max(1, math.ceil(len(levels) / points))  # keep each bin's largest value: the peak
    series = [[i, max(levels[i : i + width])] for i in range(0, len(levels), width)]
    return {
        "base_bytes": base,
        "peak_bytes": max(levels, default=base),
        "events": len(levels),
        "series": series,
        "phases": marks,
    }


def memory_check(step: dict, size: Size) -> dict:
    """gradflow_ref.memory's prediction for the GPT of `size` beside what the step held."""
    shape = dict(dropout=False, mask_bytes=1, **size.gpt)
    f32, b16 = torch.float32, torch.bfloat16
    layouts = {  # variant -> the calculator's layout of it
        "autocast_bf16": dict(param_dtype=f32, master_dtype=None, grad_dtype=f32),
        "trainer_bf16": dict(param_dtype=b16, master_dtype=f32, grad_dtype=f32),
        "fp32": dict(param_dtype=f32, master_dtype=None, grad_dtype=f32, activation_dtype=f32),
    }
    out = {}
    for name, layout in layouts.items():
        predicted = training_memory(MemoryConfig(**shape, **layout)).as_dict()
        measured = step["rows"][name]
        if "error" in measured:
            continue
        out[name] = {
            "predicted": predicted,
            "measured_state_bytes": measured["state_bytes"],
            "measured_forward_held_bytes": measured["forward_held_bytes"],
            "measured_peak_bytes": measured["peak_bytes"],
        }
    return out


# ------------------------------------------------------------------ snippets/train.py


LOG_OPTIONS = ("log-file", "log")  # train.py's JSON-lines log option, whichever it lists
# one process with a process group, as torchrun starts each rank: NCCL on a GPU, gloo on a CPU
LAUNCH = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1"]
_PAIR = re.compile(r"([A-Za-z_]+)[ =:]+(-?(?:\d+\.?\d*(?:e[-+]?\d+)?|nan|inf))", re.IGNORECASE)
_PEAK_MIB = re.compile(r"peak[ =:]+(\d+(?:\.\d+)?) ?MiB")


def _script_env(**extra) -> dict:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1", **extra)


def script_flags(script: Path | None = None) -> set[str]:
    """The long options `script --help` (snippets/train.py by default) lists, without "--"."""
    script = script or TRAIN_SCRIPT
    done = subprocess.run(
        [sys.executable, str(script), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_script_env(),
    )
    if done.returncode:
        raise RuntimeError(f"script_flags: `{script.name} --help` failed:\n{done.stderr[-2000:]}")
    return set(re.findall(r"--([a-z][a-z0-9-]*)", done.stdout)) - {"help"}


def script_command(flags: set[str], values: dict) -> tuple[list[str], list[str]]:
    """train.py arguments for `values` (option name -> value; None leaves it out), keeping only
    options in `flags`; True is the bare flag, False its --no- form where the script has one.

    Returns:
        (arguments, options that were asked for but the script does not list).
    """
    args, missing = [], []
    for name, value in values.items():
        flag = name.replace("_", "-")
        if value is None:
            continue
        if flag not in flags:
            if value is not False:  # an absent switch is off
                missing.append(flag)
            continue
        if value is True:
            args.append(f"--{flag}")
        elif value is False:
            args += [f"--no-{flag}"] if f"no-{flag}" in flags else []
        else:
            args += [f"--{flag}", str(value)]
    return args, missing


def parse_progress(line: str) -> dict | None:
    """The numbers of one progress line ("step 3, loss 5.41, ..."), or None for other lines."""
    pairs = {k.lower(): float(v) for k, v in _PAIR.findall(line)}
    return pairs if "step" in pairs and "loss" in pairs else None


def _read_log(path: Path) -> list[dict]:
    """The JSON objects of a JSON-lines log, one a line (a line that is not one is left out)."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict):
            records.append(record)
    return records


def _last(records, word: str):
    """The last number in `records` under a key containing `word` (e.g. "tokens", "mfu")."""
    for record in reversed(records):
        for key, value in record.items():
            if (
                word in key.lower()
                and isinstance(value, int | float)
                and not isinstance(value, bool)
            ):
                return value
    return None


def steady_rate(progress: list[tuple[float, int]], tokens_per_step: int, timed_from: float):
    """Tokens per second between the progress lines of a run: (arrival second, step) pairs.

    The first `timed_from` of the lines (start-up, compilation) and the last line (the last
    step also evaluates) are left out. None with fewer than four lines.
    """
    if len(progress) < 4:
        return None
    i = min(int(timed_from * len(progress)), len(progress) - 3)
    (t0, s0), (t1, s1) = progress[i], progress[-2]
    return (s1 - s0) * tokens_per_step / (t1 - t0) if t1 > t0 else None


def _run_script(args: list[str], env: dict, cwd: Path, timeout: float) -> dict:
    """Run train.py with `args` under torchrun, time-stamping each output line as it arrives."""
    command = [*LAUNCH, str(TRAIN_SCRIPT), *args]
    start = time.perf_counter()
    proc = subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    lines, progress = [], []
    try:
        for line in proc.stdout:
            lines.append(line)
            record = parse_progress(line)
            if record is not None:
                progress.append((time.perf_counter() - start, record))
        code = proc.wait()
    finally:
        timer.cancel()
        proc.stdout.close()
    return {
        "returncode": code,
        "wall_seconds": time.perf_counter() - start,
        "lines": lines,
        "progress": progress,
    }


def _script_run(flags, values, env, cwd: Path, size: Size, peak, timeout) -> dict:
    """One train.py run: its losses, tokens/s timed here and as it reports, MFU, peak memory."""
    (cwd / "tmp").mkdir(parents=True)
    env = env | {"TMPDIR": str(cwd / "tmp")}  # torchrun's own files go with the run's folder
    log = cwd / "log.jsonl"
    option = next((f for f in LOG_OPTIONS if f in flags), LOG_OPTIONS[0])
    args, missing = script_command(flags, values | {option: log})
    raw = _run_script(args, env, cwd, timeout)
    records = _read_log(log)  # steps, then a summary (peak memory, steady tokens/s, MFU)
    steps = [r for r in records if "step" in r and "loss" in r]
    printed = [record for _, record in raw["progress"]]
    source = records if steps else printed
    losses = [r["loss"] for r in sorted(steps or printed, key=lambda r: r["step"])]
    losses = [math.nan if x is None else float(x) for x in losses]  # the log writes NaN as null
    shape = size.script
    tokens = shape["micro_batch"] * shape["seq_len"]
    timing = [(t, int(r["step"])) for t, r in raw["progress"]]
    rate = steady_rate(timing, tokens, size.timed_from)
    per_token = flops_per_token(shape | {"vocab": 256})  # one token per byte
    peak_mib = _last(records, "peak")
    if peak_mib is None:
        found = [float(m) for line in raw["lines"] for m in _PEAK_MIB.findall(line)]
        peak_mib = found[-1] if found else None
    out = {
        "args": args,
        "missing_flags": missing,
        "returncode": raw["returncode"],
        "wall_seconds": raw["wall_seconds"],
        "log": "jsonl" if steps else "stdout",
        "steps_done": len(losses),
        "losses": losses,
        "tokens_per_step": tokens,
        "tokens_per_second": rate,
        "mfu": mfu(rate, per_token, peak) if rate else None,
        "script_tokens_per_second": _last(source, "tokens"),
        "script_mfu": _last(source, "mfu"),
        "peak_mib": peak_mib,
    }
    if raw["returncode"] or not losses:
        out["output_tail"] = "".join(raw["lines"])[-4000:]
    return out


def _agreement(losses: list, reference: list, steps: int) -> dict:
    n = min(steps, len(losses), len(reference))
    diffs = [abs(a - b) for a, b in zip(losses[:n], reference[:n])]
    return {"steps": n, "abs_diff": diffs, "max_abs_diff": max(diffs) if diffs else None}


def train_script(device, size: Size, peak: dict | None = None) -> dict:
    """snippets/train.py on one process under torchrun (NCCL on CUDA, gloo on a CPU), --compile
    off and on, beside a CPU run of the same seed over its first steps.

    Only options the script's --help lists are passed; the others are recorded as missing. The
    learning rate of the first `agree_steps` steps is the warmup's, the same whatever --steps.
    """
    flags = script_flags()
    data = ROOT / "gradflow_ref" / "data" / "shakespeare.txt"
    base = size.script | {"seed": 0, "print_every": 1, "data": data}
    here = {} if device.type == "cuda" else {"CUDA_VISIBLE_DEVICES": ""}
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, compiled in (("eager", False), ("compiled", True)):
            if compiled and "compile" not in flags:
                runs[name] = {"skipped": "snippets/train.py lists no --compile option"}
                continue
            if compiled and not size.script_compile:
                runs[name] = {"skipped": "--quick: compiling takes most of a minute on a CPU"}
                continue
            values = base | {
                "steps": size.script_steps,
                "eval_every": size.script_steps,
                "max_seconds": size.script_seconds,
                "compile": compiled,
                "peak_flops": peak and peak["bf16_flops"],
            }
            timeout = 3 * size.script_seconds + 120
            runs[name] = _script_run(
                flags, values, _script_env(**here), Path(tmp, name), size, peak, timeout
            )
        reference = "eager"
        if device.type == "cuda":
            reference = "cpu"
            values = base | {"steps": size.agree_steps, "eval_every": size.agree_steps}
            cpu = _script_env(CUDA_VISIBLE_DEVICES="")
            runs["cpu"] = _script_run(flags, values, cpu, Path(tmp, "cpu"), size, None, 600)
    agreement = {
        name: _agreement(run["losses"], runs[reference]["losses"], size.agree_steps)
        for name, run in runs.items()
        if name != reference and run.get("losses") and runs[reference].get("losses")
    }
    return {
        "script": "snippets/train.py",
        "launch": "torchrun --standalone --nproc-per-node 1 (NCCL on a GPU, gloo on a CPU)",
        "options": sorted(flags),
        "shape": size.script | {"vocab": 256},
        "flops_per_token": flops_per_token(size.script | {"vocab": 256}),
        "reference": reference,
        "runs": runs,
        "agreement": agreement,
    }


# ------------------------------------------------------------------ the cuda-marked tests


def cuda_test_files(folder: Path = ROOT / "tests") -> list[str]:
    """The test files in `folder` that hold a `cuda`-marked test, relative to its parent."""
    marked = re.compile(r"^\s*(@pytest\.mark\.cuda\b|pytestmark\b.*\bcuda\b)", re.MULTILINE)
    return [
        str(p.relative_to(folder.parent))
        for p in sorted(folder.glob("test_*.py"))
        if marked.search(p.read_text(encoding="utf-8"))
    ]


def cuda_tests(device, workers=8, timeout=240) -> dict:
    """Run the suite's `cuda`-marked tests; return each test's outcome (skipped off CUDA)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "cuda.xml"
        command = [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider"]
        command += ["-p", "no:benchmark"]  # pytest-benchmark, where installed, warns under xdist
        if device.type == "cuda":
            command += ["-n", str(workers)]
        command += [f"--junitxml={report}", *cuda_test_files()]
        start = time.perf_counter()
        try:
            env = _script_env()  # snippets import gradflow_ref from here
            done = subprocess.run(
                command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
            )
            code, output = done.returncode, done.stdout + done.stderr
        except subprocess.TimeoutExpired as err:
            code, output = "timeout", f"{err.stdout or ''}{err.stderr or ''}"
            output = output.decode() if isinstance(output, bytes) else output
        seconds = time.perf_counter() - start
        tests = {}
        if report.exists():
            for case in ET.parse(report).getroot().iter("testcase"):
                outcome = "passed"
                for tag in ("failure", "error", "skipped"):
                    if case.find(tag) is not None:
                        outcome = {"failure": "failed"}.get(tag, tag)
                tests[f"{case.get('classname')}::{case.get('name')}"] = outcome
    summary = {k: sum(v == k for v in tests.values()) for k in ("passed", "failed", "error")}
    summary["skipped"] = sum(v == "skipped" for v in tests.values())
    return {
        "returncode": code,
        "seconds": seconds,
        "files": cuda_test_files(),
        "summary": summary,
        "tests": tests,
        "output_tail": output[-6000:] if code else "",
    }


# ------------------------------------------------------------------ wheels for an offline host


def _installed(requirement: str) -> bool:
    """Whether `requirement` ("name==version pattern", e.g. "torchao==0.18.*") is installed."""
    name, _, pattern = requirement.partition("==")
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return fnmatch.fnmatch(version, pattern or "*")


def stage_wheels(folder, requirements=GPU_WHEELS) -> list[Path]:
    """Download the wheels of `requirements` into `folder`, without their dependencies (they
    have none that torch does not bring). Needs the package index; run it where PyPI is reachable.

    Raises:
        RuntimeError: pip could not download them (its last lines say why).
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += ["--dest", str(folder), *requirements]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(
            f"stage_wheels: `pip download {' '.join(requirements)}` failed (is PyPI reachable?):\n"
            + "\n".join((done.stdout + done.stderr).splitlines()[-5:])
        )
    return sorted(folder.glob("*.whl"))


def install_wheels(folder, requirements=GPU_WHEELS, target=None) -> dict:
    """Install whichever of `requirements` is missing from the wheels in `folder`, with no
    network (pip --no-index --find-links): into this Python's environment, or into `target`.

    Where the environment cannot be written, they go to a new folder that is put first on
    sys.path and PYTHONPATH (so the subprocesses see them too).

    Returns:
        {"folder", "required", "installed": what was installed now, "target": where, if not
        the environment, "message": None, or why something is still missing (the FP8 section
        then reports it as skipped)}.
    """
    out = {"folder": None if folder is None else str(folder), "required": list(requirements)}
    out |= {"installed": [], "target": None, "message": None}
    missing = [r for r in requirements if not _installed(r)]
    if not missing:
        return out
    wheels = sorted(Path(folder).glob("*.whl")) if folder and Path(folder).is_dir() else []
    if not wheels:
        out["message"] = (
            f"{', '.join(missing)} not installed and no wheel in {folder}: run `make gpu-wheels` "
            "(python -m tools.bench_gpu --stage-wheels wheels) where PyPI is reachable, then "
            "bring wheels/ to this host"
        )
        return out
    command = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(folder)]
    command += ["--no-deps", "--no-cache-dir", "--quiet", "--disable-pip-version-check"]
    command += missing
    done = subprocess.run(command + (["--target", str(target)] if target else []),
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode and target is None:  # a read-only environment: a folder beside it
        target = Path(tempfile.mkdtemp(prefix="bench-gpu-site-"))
        done = subprocess.run(command + ["--target", str(target)], capture_output=True, text=True)
        if done.returncode:
            shutil.rmtree(target, ignore_errors=True)
        else:
            sys.path.insert(0, str(target))
            path = os.environ.get("PYTHONPATH")
            os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(target), path]))
    if done.returncode:
        out["message"] = f"`pip install --no-index --find-links {folder}` failed:\n" + "\n".join(
            (done.stdout + done.stderr).splitlines()[-5:]
        )
        return out
    importlib.invalidate_caches()
    out["installed"], out["target"] = missing, None if target is None else str(target)
    return out


# ------------------------------------------------------------------ the run


def _nccl() -> str:
    version = torch.cuda.nccl.version()  # (major, minor, patch), an int in older releases
    return ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


def _driver() -> str | None:
    query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
    done = subprocess.run(query, capture_output=True, text=True, timeout=30)
    return done.stdout.strip().splitlines()[0] if done.stdout.strip() else None


def versions() -> dict:
    """Python, torch, CUDA, cuDNN, NCCL, Triton, torchao and the GPU driver, where present."""
    out = {"python": platform.python_version(), "torch": torch.__version__}
    out["cuda"] = torch.version.cuda
    for name in ("triton", "torchao"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    if torch.cuda.is_available():
        found = {"cudnn": torch.backends.cudnn.version, "nccl": _nccl, "driver": _driver}
        for name, read in found.items():
            try:  # a version that cannot be read is recorded as unknown, not a failed run
                out[name] = read()
            except Exception:  # noqa: BLE001
                out[name] = None
    return out


def _device_name(device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine() or "cpu"


def _mib(n):
    return "-" if n is None else f"{n / 2**20:,.0f} MiB"


def _pct(x):
    return "-" if x is None else f"{x:.1%}"


def _print_summary(result):
    print(
        f"{result['device']} ({result['device_type']}), torch {result['torch']}, "
        f"CUDA {result['cuda']}, {result['date']}; versions {result['versions']}"
    )
    peak = result.get("peak")
    print(f"MFU against: {peak['bf16_flops'] / 1e12:g} TFLOP/s ({peak['card']})" if peak else
          "MFU: no stated peak for this device (--peak-tflops sets one)")  # fmt: skip
    for key in SECTIONS:
        if isinstance(result.get(key), dict) and "error" in result[key]:
            print(f"{key}: FAILED (see the JSON)")
    for key, reason in result.get("skipped_sections", {}).items():
        print(f"{key}: not run ({reason})")
    sweep = result.get("checkpointing") or {}
    for r in sweep.get("rows", []):
        print(
            f"  MLP K={r['k']:>2}: {r['saved_activations']:5.1f} held, {r['recomputed']:>2} "
            f"recomputed, {r['seconds'] * 1e3:8.2f} ms, peak {_mib(r['peak_bytes'])}"
        )
    print(f"GPT: {result['gpt']}")
    for section in ("training_step", "gpt_checkpointing"):
        for name, r in (result.get(section) or {}).get("rows", {}).items():
            if "error" in r:
                print(f"  {section} {name:>20}: FAILED {r['error'].splitlines()[-1]}")
                continue
            print(
                f"  {section} {name:>20}: {r['step_seconds'] * 1e3:8.1f} ms, "
                f"{r['tokens_per_second']:>10,.0f} tok/s, MFU {_pct(r.get('mfu'))}, peak "
                f"{_mib(r['peak_bytes'])}, forward holds {_mib(r['forward_held_bytes'])}"
            )
    fp8 = result.get("fp8_training") or {}
    if "skipped" in fp8:
        print(f"  fp8_training: skipped: {fp8['skipped']}")
    for name, r in fp8.get("runs", {}).items():
        if "error" in r:
            print(f"  fp8 {name:>10}: FAILED {r['error'].splitlines()[-1]}")
            continue
        print(
            f"  fp8 {name:>10}: {r['step_seconds'] * 1e3:8.1f} ms, {r['tokens_per_second']:>10,.0f}"
            f" tok/s, MFU {_pct(r['mfu'])}, peak {_mib(r['peak_bytes'])}, loss "
            f"{r['losses'][0]:.3f} -> {r['final_loss']:.4f}, {len(r['converted'])} linears in FP8"
        )
    script = result.get("train_script") or {}
    for name, r in script.get("runs", {}).items():
        if "skipped" in r:
            print(f"  train.py {name:>8}: skipped: {r['skipped']}")
            continue
        rate = r["tokens_per_second"]
        print(
            f"  train.py {name:>8}: rc {r['returncode']}, {r['steps_done']} steps in "
            f"{r['wall_seconds']:.0f} s, {'-' if rate is None else f'{rate:,.0f}'} tok/s, MFU "
            f"{_pct(r['mfu'])}, peak {r['peak_mib']} MiB, missing options {r['missing_flags']}"
        )
    for name, a in script.get("agreement", {}).items():
        print(f"  train.py {name} vs {script['reference']}: max |loss diff| {a['max_abs_diff']}")
    for name in ("fp16", "bf16"):
        r = (result.get("fp16_run") or {}).get(name)
        if r:
            print(
                f"  {name} run: final loss {r['final_loss']:.4f} after "
                f"{result['fp16_run']['steps']} steps, {r['skipped_steps']} skipped"
            )
    for name, r in result.get("memory_check", {}).items():
        p = r["predicted"]
        print(
            f"  calculator {name}: state {_mib(p['total'] - p['activations'] - p['gradients'])}"
            f" + grads {_mib(p['gradients'])}, activations {_mib(p['activations'])}; measured "
            f"state {_mib(r['measured_state_bytes'])}, forward holds "
            f"{_mib(r['measured_forward_held_bytes'])}, peak {_mib(r['measured_peak_bytes'])}"
        )
    timeline = result.get("memory_timeline")
    if timeline and "error" not in timeline:
        print(
            f"  timeline: {timeline['events']} allocator events, peak "
            f"{_mib(timeline['peak_bytes'])}, phases {timeline['phases']}"
        )
    elif timeline:
        print("memory_timeline: FAILED (see the JSON)")
    print(f"section seconds: { {k: round(v) for k, v in result['section_seconds'].items()} }")
    tests = result["cuda_tests"]
    print(f"cuda tests: {tests['summary']} in {tests['seconds']:.0f} s")
    if tests["output_tail"]:
        print(tests["output_tail"])


# in the order they run: the cheap sections the pages already render first (a run cut short by
# --budget keeps them), then the new ones; FP8 after the other sections that compile in this
# process, since torchao's conversion patches inductor's code generation for later compilations
# (train.py compiles in its own process)
SECTIONS = (
    "checkpointing",
    "fp16_run",
    "memory_timeline",
    "training_step",
    "gpt_checkpointing",
    "fp8_training",
    "train_script",
)
TESTS_RESERVE = 90  # seconds of --budget kept for the cuda-marked tests


def main(argv=None) -> dict:
    """Run every measurement, print a summary and write the JSON file; return the result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default="results", help="folder of the JSON file")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: check the command")
    parser.add_argument("--snapshot", default=None, help="write the timeline's raw snapshot here")
    parser.add_argument("--no-tests", action="store_true", help="skip the cuda-marked tests")
    parser.add_argument(
        "--only", default=None, help=f"comma-separated sections to run, of {', '.join(SECTIONS)}"
    )
    parser.add_argument(
        "--wheels",
        default=str(ROOT / "wheels"),
        help="folder of staged wheels to install from, offline, what is missing (torchao)",
    )
    parser.add_argument(
        "--stage-wheels",
        metavar="DIR",
        default=None,
        help=f"download {', '.join(GPU_WHEELS)} into DIR (needs PyPI) and exit",
    )
    parser.add_argument(
        "--peak-tflops", type=float, default=None, help="dense BF16 peak for MFU, if not known"
    )
    parser.add_argument(
        "--budget",
        type=float,
        default=None,
        help=f"seconds the whole command may take: no section starts after BUDGET - "
        f"{TESTS_RESERVE} (those left are recorded as skipped) and the cuda tests stop at BUDGET",
    )
    args = parser.parse_args(argv)
    if args.stage_wheels:
        for wheel in stage_wheels(args.stage_wheels):
            print(f"staged {wheel}")
        return {}
    device = torch.device(args.device)
    if device.type not in ("cuda", "cpu"):
        raise SystemExit(f"bench_gpu: --device must be cuda or cpu, got {args.device!r}.")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_gpu: --device cuda, but torch.cuda.is_available() is False.")
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    only = SECTIONS if args.only is None else tuple(s.strip() for s in args.only.split(","))
    if unknown := [s for s in only if s not in SECTIONS]:
        raise SystemExit(f"bench_gpu: --only takes sections of {SECTIONS}, got {unknown}.")
    if args.peak_tflops is not None and not 0 < args.peak_tflops < math.inf:
        raise SystemExit(f"bench_gpu: --peak-tflops must be positive, got {args.peak_tflops}.")
    if args.budget is not None and not TESTS_RESERVE < args.budget < math.inf:
        raise SystemExit(
            f"bench_gpu: --budget must be more than {TESTS_RESERVE} seconds, got {args.budget}."
        )
    size = SIZES["quick" if args.quick else device.type]
    started = time.perf_counter()
    wheels = install_wheels(args.wheels)  # before versions(): torchao's is recorded
    if wheels["message"]:
        print(f"bench_gpu: {wheels['message']}", file=sys.stderr)
    name = _device_name(device)
    peak = stated_peak(name) if device.type == "cuda" else None
    if args.peak_tflops is not None:
        peak = {"card": None, "bf16_flops": args.peak_tflops * 1e12, "source": "--peak-tflops"}
    now = datetime.datetime.now(datetime.UTC)
    result = {
        "device": name,
        "device_type": device.type,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "versions": versions(),
        "cpu_threads": torch.get_num_threads(),
        "date": now.strftime("%Y-%m-%d"),
        "started": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "quick": args.quick,
        "peak": peak,
        "mfu": "model FLOP/s (tools.bench_gpu.flops_per_token) over the datasheet's dense BF16 "
        "peak, for every precision",
        "wheels": wheels,
        "gpt": size.gpt
        | {
            "n_params": parameter_count(MemoryConfig(**size.gpt)),
            "dropout": 0.0,
            "attention": "unfused: the softmax scores are stored for backward",
        },
        "steps_timed": size.steps,
        "section_seconds": {},
        "skipped_sections": {},
    }
    if device.type == "cuda":  # what the card reports and what a program can allocate
        free, total = torch.cuda.mem_get_info(device)
        result["memory_total_bytes"], result["memory_free_bytes_at_start"] = total, free
    sections = {
        "training_step": partial(training_step, device, size, peak),
        "checkpointing": partial(checkpoint_sweep, device, size),
        "gpt_checkpointing": partial(gpt_checkpointing, device, size, peak),
        "fp16_run": partial(fp16_run, device, size),
        "memory_timeline": partial(memory_timeline, device, size, snapshot=args.snapshot),
        "train_script": partial(train_script, device, size, peak),
        "fp8_training": partial(fp8_training, device, size, peak),
    }
    slug = re.sub(r"[^a-z0-9]+", "-", f"{device.type}-{name}".lower()).strip("-")
    suffix = ("-quick" if args.quick else "") + ("" if args.only is None else "-partial")
    out = Path(args.out) / f"bench-{slug}{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    result["cuda_tests"] = {
        "returncode": None,
        "seconds": 0.0,
        "summary": {},
        "tests": {},
        "output_tail": "not run",
    }
    for key in SECTIONS:  # a section that fails is recorded, the others still run
        if key not in only:
            continue
        if args.budget is not None and time.perf_counter() - started > args.budget - TESTS_RESERVE:
            result["skipped_sections"][key] = f"not started: --budget {args.budget:g} s"
            continue
        print(f"bench_gpu: {key} ...", file=sys.stderr, flush=True)
        begun = time.perf_counter()
        try:
            result[key] = sections[key]()
        except Exception:  # noqa: BLE001
            result[key] = {"error": traceback.format_exc()}
            print(f"{key} failed:\n{result[key]['error']}", file=sys.stderr)
        result["section_seconds"][key] = time.perf_counter() - begun
        if key == "training_step" and "rows" in result[key]:
            result["memory_check"] = memory_check(result[key], size)
        out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")  # in case of a stop
    if not args.no_tests:
        left = 240 if args.budget is None else max(30, args.budget - time.perf_counter() + started)
        result["cuda_tests"] = cuda_tests(device, timeout=min(240, left))
    result["seconds"] = time.perf_counter() - started
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    _print_summary(result)
    print(f"wrote {out} in {result['seconds']:.0f} s")
    return result


if __name__ == "__main__":
    main()
