"""Benchmark checkpointing and the full training step; CUDA when present, CPU otherwise.

    python -m tools.bench_gpu [--out results/bench-<device>.json] [--device cuda|cpu]

Prints the figures and writes them as JSON (device name and type, torch version, date) for
docs/checkpointing.md and docs/pipeline.md, which render a committed CUDA result as a table.
A committed results/bench-*.json ships inside the gradflow_ref package (gradflow_ref/committed
links to results/), where gradflow_ref.benchmarks.committed_runs() reads it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import re
import statistics
import time
from functools import partial
from pathlib import Path

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint_sequential as torch_checkpoint_sequential

from gradflow_ref.checkpointing import checkpoint_sequential, measure, mlp, segment_model
from gradflow_ref.pipeline import PipelineConfig, Trainer

__all__ = ["checkpoint_sweep", "pipeline_bench", "precision_bench", "main"]

SIZES = {  # (layers, width, batch) of the checkpointing sweep; the GPU gets a larger MLP
    "cuda": (64, 2048, 1024),
    "cpu": (64, 128, 128),
}


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _median_seconds(run, device, repeats):
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        run()
        _sync(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _forward_backward(run):
    run().sum().backward()


def checkpoint_sweep(device, repeats=9) -> dict:
    """Measure saved bytes, CUDA peak, recomputed forwards and time for each segment count."""
    n, width, batch = SIZES[device.type]
    net = mlp(n, width, device=device)
    x = torch.randn(batch, width, device=device)
    unit = batch * width * 4  # bytes of one layer's output
    rows = []
    for segments in (1, 2, 4, 8, 16, 32, 64):
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
                "seconds": _median_seconds(partial(_forward_backward, run), device, repeats),
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


def _classifier(width, depth, device):
    torch.manual_seed(0)
    layers = [nn.Linear(width, width) if i % 2 == 0 else nn.GELU() for i in range(2 * depth)]
    return nn.Sequential(*layers, nn.Linear(width, 16)).to(device)


def pipeline_bench(device, steps=10) -> dict:
    """Time Trainer.step (BF16, 4 micro-batches) with and without checkpointing; CUDA peak."""
    width, depth, rows = (2048, 16, 1024) if device.type == "cuda" else (128, 8, 64)
    gen = torch.Generator(device=device).manual_seed(0)
    batches = [
        (
            torch.randn(rows, width, device=device, generator=gen),
            torch.randint(0, 16, (rows,), device=device, generator=gen),
        )
        for _ in range(4)
    ]
    out = {"width": width, "depth": depth, "rows": rows, "micro_batches": 4}
    for name, segments in (("no_checkpointing", 1), ("checkpointing", 4)):
        trainer = Trainer(
            _classifier(width, depth, device),
            PipelineConfig(warmup_steps=2, total_steps=steps + 2, segments=segments),
        )
        trainer.step(batches)  # warm-up
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        seconds = _median_seconds(partial(trainer.step, batches), device, steps)
        peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
        out[name] = {"segments": segments, "step_seconds": seconds, "peak_bytes": peak}
    return out


def precision_bench(device, repeats=10) -> dict:
    """Time forward + backward of the sweep's MLP in FP32 and under BF16 autocast."""
    n, width, batch = SIZES[device.type]
    net = mlp(n // 4, width, device=device)
    x = torch.randn(batch, width, device=device)

    def run(dtype):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype != torch.float32):
            out = net(x)
        out.float().sum().backward()

    run(torch.float32), run(torch.bfloat16)
    return {
        name: _median_seconds(lambda d=dtype: run(d), device, repeats)
        for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16))
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


def main(argv=None) -> dict:
    """Run all benchmarks, print a summary and write the JSON file; return the result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--out", default=None, help="JSON path (default: results/bench-<device>.json)"
    )
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    name = _device_name(device)
    result = {
        "device": name,
        "device_type": device.type,
        "torch": torch.__version__,
        "cpu_threads": torch.get_num_threads(),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "checkpointing": checkpoint_sweep(device),
        "pipeline": pipeline_bench(device),
        "precision": precision_bench(device),
    }
    slug = re.sub(r"[^a-z0-9]+", "-", f"{device.type}-{name}".lower()).strip("-")
    out = Path(args.out or f"results/bench-{slug}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    sweep = result["checkpointing"]
    print(f"{name} ({device.type}), torch {torch.__version__}")
    print(
        f"checkpointing sweep: {sweep['n_layers']}-layer MLP, width {sweep['width']}, "
        f"batch {sweep['batch']}"
    )
    for r in sweep["rows"]:
        peak = f"{r['peak_bytes'] / 2**20:8.1f} MiB peak" if r["peak_bytes"] is not None else ""
        print(
            f"  K={r['k']:>2}: {r['saved_activations']:5.1f} activations held "
            f"(model {r['model_activations']:5.1f}), {r['recomputed']:>2} recomputed, "
            f"{r['seconds'] * 1e3:8.2f} ms {peak}"
        )
    print(
        f"  best K = {sweep['best_k']}: {sweep['saving_at_best']:.2f}x fewer saved bytes, "
        f"{sweep['time_ratio_at_best']:.2f}x the time; equal to torch: {sweep['torch_equal']}"
    )
    for key in ("no_checkpointing", "checkpointing"):
        p = result["pipeline"][key]
        peak = f", {p['peak_bytes'] / 2**20:.1f} MiB peak" if p["peak_bytes"] else ""
        print(f"pipeline step, {key}: {p['step_seconds'] * 1e3:.2f} ms{peak}")
    prec = result["precision"]
    print(
        f"MLP forward+backward: FP32 {prec['float32'] * 1e3:.2f} ms, "
        f"BF16 autocast {prec['bfloat16'] * 1e3:.2f} ms"
    )
    print(f"wrote {out}")
    return result


if __name__ == "__main__":
    main()
