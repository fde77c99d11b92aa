"""Measure checkpointing and the training step on one device: CUDA when present, else CPU.

    python -m tools.bench_gpu [--out results/] [--device cuda|cpu] [--quick] [--snapshot FILE]

Writes results/bench-<device>.json (device, torch, CUDA, date) for docs/checkpointing.md,
docs/pipeline.md and docs/cheatsheet.md, and prints a summary. On CUDA it also runs the test
suite's `cuda`-marked tests and records a memory timeline of one training step
(torch.cuda.memory._record_memory_history); `--snapshot` keeps that step's raw snapshot for
https://pytorch.org/memory_viz. Committed results/bench-*.json files ship inside gradflow_ref
(gradflow_ref/committed links to results/) and are read by gradflow_ref.benchmarks.
`--quick` runs every section at a tiny size, to check the command before a long run.
"""

from __future__ import annotations

import argparse
import datetime
import gc
import json
import math
import os
import pickle
import platform
import re
import statistics
import subprocess
import sys
import tempfile
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
from gradflow_ref.memory import GPT, MemoryConfig, parameter_count, training_memory
from gradflow_ref.pipeline import PipelineConfig, Trainer

__all__ = [
    "SIZES",
    "Size",
    "checkpoint_sweep",
    "gpt_checkpointing",
    "training_step",
    "fp16_run",
    "memory_timeline",
    "memory_check",
    "cuda_tests",
    "main",
]

ROOT = Path(__file__).resolve().parents[1]
CUDA_TEST_FILES = [
    "tests/test_checkpointing.py",
    "tests/test_clipping.py",
    "tests/test_loss_scaling.py",
    "tests/test_master.py",
    "tests/test_pipeline.py",
    "tests/test_snippets.py",
]
# the selective policy keeps the linear layers' outputs; attention's batched products, softmax
# and every element-wise op are recomputed (Korthikanti et al. 2022's selective recomputation)
SAVED_OPS = [torch.ops.aten.mm.default, torch.ops.aten.addmm.default]


@dataclass(frozen=True)
class Size:
    mlp: tuple[int, int, int]  # (layers, width, batch) of the MLP checkpointing sweep
    gpt: dict  # MemoryConfig fields of the GPT the step and checkpointing runs use
    steps: int  # timed optimizer steps per variant (median reported), after 3 warm-up steps
    train_steps: int  # optimizer steps of the FP16/BF16 training runs


SIZES = {
    "cuda": Size(
        (64, 2048, 1024),
        dict(n_layers=16, hidden=1024, n_heads=16, seq_len=1024, micro_batch=8, vocab=32768),
        10,
        60,
    ),
    "cpu": Size(
        (64, 128, 128),
        dict(n_layers=4, hidden=128, n_heads=4, seq_len=128, micro_batch=4, vocab=512),
        5,
        30,
    ),
    "quick": Size(
        (8, 32, 16),
        dict(n_layers=4, hidden=32, n_heads=2, seq_len=16, micro_batch=2, vocab=64),
        2,
        4,
    ),
}


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _reset_peak(device):
    gc.collect()  # the previous variant's model and optimizer
    if device.type == "cuda":
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


def gpt_model(cfg: MemoryConfig, device, seed=0) -> nn.Sequential:
    """gradflow_ref.memory.GPT (no dropout) as an nn.Sequential: embed, blocks, logits."""
    torch.manual_seed(seed)
    gpt = GPT(cfg, dropout=0.0)
    for table in (gpt.wte, gpt.wpe):  # GPT-2's 0.02: unit-scale logits from the tied head
        nn.init.normal_(table.weight, std=0.02)
    return nn.Sequential(_Embed(gpt), *gpt.layers, _Logits(gpt)).to(device)


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


def _forward(model, idx, mode, segments):
    """Run `model` on `idx` with checkpointing `mode`: none, block, sqrt or selective."""
    embed, *blocks, head = model
    x = embed(idx)
    if mode == "block":
        for block in blocks:
            x = checkpoint(block, x, use_reentrant=False)
    elif mode == "selective":
        context = partial(create_selective_checkpoint_contexts, SAVED_OPS)
        for block in blocks:
            x = checkpoint(block, x, use_reentrant=False, context_fn=context)
    elif mode == "sqrt":
        x = torch_checkpoint_sequential(nn.Sequential(*blocks), segments, x, use_reentrant=False)
    else:
        for block in blocks:
            x = block(x)
    return head(x)


class _Plain:
    """The step a reader writes: optional autocast (and GradScaler), clip, fused AdamW."""

    def __init__(self, cfg, device, dtype=None, mode="none", scaler=False):
        self.model = gpt_model(cfg, device)
        self.device, self.dtype, self.mode = device, dtype, mode
        self.segments = max(1, round(math.sqrt(cfg.n_layers)))
        self.opt = torch.optim.AdamW(
            self.model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1, fused=True
        )
        self.scaler = torch.amp.GradScaler(device.type, enabled=scaler)
        self.skipped = 0

    def forward(self, idx, targets):
        amp = self.dtype is not None
        with torch.autocast(self.device.type, dtype=self.dtype or torch.bfloat16, enabled=amp):
            return _loss_fn(_forward(self.model, idx, self.mode, self.segments), targets)

    def step(self, batch):
        loss = self.forward(*batch)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.opt)
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        scale = self.scaler.get_scale()
        self.scaler.step(self.opt)
        self.scaler.update()
        self.skipped += int(self.scaler.is_enabled() and self.scaler.get_scale() < scale)
        self.opt.zero_grad(set_to_none=True)
        return loss.item()


class _Ref:
    """gradflow_ref.pipeline.Trainer: BF16 model, FP32 master weights, one micro-batch."""

    def __init__(self, cfg, device):
        pipe = PipelineConfig(lr=1e-3, warmup_steps=1, total_steps=10**6, max_norm=1.0)
        self.trainer = Trainer(gpt_model(cfg, device), pipe, loss_fn=_loss_fn)
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


def _time_step(make, cfg, device, steps, precision="highest") -> dict:
    """Build a step, warm it up, then time `steps` steps; memory as the step holds it.

    An error (out of memory, say) is returned as {"error": ...} so the other variants still run.
    """
    torch.set_float32_matmul_precision(precision)
    try:
        runner = make(cfg, device)
        batch = _batch(cfg, device, seed=1)
        for _ in range(3):
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


def training_step(device, size: Size) -> dict:
    """Step time, tokens per second and memory of each precision variant on the same GPT."""
    cfg = MemoryConfig(dropout=False, **size.gpt)
    rows = {}
    for name, (make, what) in VARIANTS.items():
        precision = "high" if name == "tf32" else "highest"
        rows[name] = {"what": what} | _time_step(make, cfg, device, size.steps, precision)
    return {"rows": rows, "tokens_per_step": cfg.micro_batch * cfg.seq_len}


def gpt_checkpointing(device, size: Size) -> dict:
    """Peak memory and step time of each checkpointing mode (BF16 autocast, FP32 params)."""
    cfg = MemoryConfig(dropout=False, **size.gpt)
    rows = {}
    for mode, what in CHECKPOINT_MODES.items():
        make = partial(_Plain, dtype=torch.bfloat16, mode=mode)
        rows[mode] = {"what": what} | _time_step(make, cfg, device, size.steps)
    segments = max(1, round(math.sqrt(cfg.n_layers)))
    return {"rows": rows, "segments": segments}


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


def cuda_tests(device, workers=8, timeout=240) -> dict:
    """Run the suite's `cuda`-marked tests; return each test's outcome (skipped off CUDA)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "cuda.xml"
        command = [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-p", "no:cacheprovider"]
        command += ["-p", "no:benchmark"]  # pytest-benchmark, where installed, warns under xdist
        if device.type == "cuda":
            command += ["-n", str(workers)]
        command += [f"--junitxml={report}", *CUDA_TEST_FILES]
        start = time.perf_counter()
        try:
            path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
            env = dict(os.environ, PYTHONPATH=path)  # snippets import gradflow_ref from here
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
        "summary": summary,
        "tests": tests,
        "output_tail": output[-6000:] if code else "",
    }


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


def _print_summary(result):
    print(
        f"{result['device']} ({result['device_type']}), torch {result['torch']}, "
        f"CUDA {result['cuda']}, {result['date']}"
    )
    for key in ("checkpointing", "training_step", "gpt_checkpointing", "fp16_run"):
        if "error" in result[key]:
            print(f"{key}: FAILED (see the JSON)")
    sweep = result["checkpointing"]
    for r in sweep.get("rows", []):
        print(
            f"  MLP K={r['k']:>2}: {r['saved_activations']:5.1f} held, {r['recomputed']:>2} "
            f"recomputed, {r['seconds'] * 1e3:8.2f} ms, peak {_mib(r['peak_bytes'])}"
        )
    print(f"GPT: {result['gpt']}")
    for section in ("training_step", "gpt_checkpointing"):
        for name, r in result[section].get("rows", {}).items():
            if "error" in r:
                print(f"  {section} {name:>14}: FAILED {r['error'].splitlines()[-1]}")
                continue
            print(
                f"  {section} {name:>14}: {r['step_seconds'] * 1e3:8.1f} ms, "
                f"{r['tokens_per_second']:>10,.0f} tok/s, peak {_mib(r['peak_bytes'])}, "
                f"state {_mib(r['state_bytes'])}, forward holds {_mib(r['forward_held_bytes'])}"
            )
    for name in ("fp16", "bf16"):
        r = result["fp16_run"].get(name)
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
    timeline = result["memory_timeline"]
    if timeline and "error" not in timeline:
        print(
            f"  timeline: {timeline['events']} allocator events, peak "
            f"{_mib(timeline['peak_bytes'])}, phases {timeline['phases']}"
        )
    elif timeline:
        print("memory_timeline: FAILED (see the JSON)")
    tests = result["cuda_tests"]
    print(f"cuda tests: {tests['summary']} in {tests['seconds']:.0f} s")
    if tests["output_tail"]:
        print(tests["output_tail"])


def main(argv=None) -> dict:
    """Run every measurement, print a summary and write the JSON file; return the result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default="results", help="folder of the JSON file")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: check the command")
    parser.add_argument("--snapshot", default=None, help="write the timeline's raw snapshot here")
    parser.add_argument("--no-tests", action="store_true", help="skip the cuda-marked tests")
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type not in ("cuda", "cpu"):
        raise SystemExit(f"bench_gpu: --device must be cuda or cpu, got {args.device!r}.")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("bench_gpu: --device cuda, but torch.cuda.is_available() is False.")
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    size = SIZES["quick" if args.quick else device.type]
    started = time.perf_counter()
    name = _device_name(device)
    result = {
        "device": name,
        "device_type": device.type,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cpu_threads": torch.get_num_threads(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "quick": args.quick,
        "gpt": size.gpt
        | {
            "n_params": parameter_count(MemoryConfig(**size.gpt)),
            "dropout": 0.0,
            "attention": "unfused: the softmax scores are stored for backward",
        },
        "steps_timed": size.steps,
    }
    if device.type == "cuda":  # what the card reports and what a program can allocate
        free, total = torch.cuda.mem_get_info(device)
        result["memory_total_bytes"], result["memory_free_bytes_at_start"] = total, free
    sections = {
        "checkpointing": partial(checkpoint_sweep, device, size),
        "training_step": partial(training_step, device, size),
        "gpt_checkpointing": partial(gpt_checkpointing, device, size),
        "fp16_run": partial(fp16_run, device, size),
        "memory_timeline": partial(memory_timeline, device, size, snapshot=args.snapshot),
    }
    for key, run in sections.items():  # a section that fails is recorded, the others still run
        try:
            result[key] = run()
        except Exception:  # noqa: BLE001
            result[key] = {"error": traceback.format_exc()}
            print(f"{key} failed:\n{result[key]['error']}", file=sys.stderr)
    if "rows" in result["training_step"]:
        result["memory_check"] = memory_check(result["training_step"], size)
    slug = re.sub(r"[^a-z0-9]+", "-", f"{device.type}-{name}".lower()).strip("-")
    out = Path(args.out) / f"bench-{slug}{'-quick' if args.quick else ''}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    result["cuda_tests"] = {
        "returncode": None,
        "seconds": 0.0,
        "summary": {},
        "tests": {},
        "output_tail": "not run",
    }
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")  # in case tests hang
    if not args.no_tests:
        result["cuda_tests"] = cuda_tests(device)
    result["seconds"] = time.perf_counter() - started
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    _print_summary(result)
    print(f"wrote {out} in {result['seconds']:.0f} s")
    return result


if __name__ == "__main__":
    main()
