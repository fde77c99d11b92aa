"""snippets/train.py against a plain PyTorch loop on one process: tokens/s in paired runs.

    python -m tools.plain_loop                        # BF16, the script's default model
    python -m tools.plain_loop --pairs 7 -- --precision fp32 --steps 60

The plain loop is what a practitioner writes for one GPU: train.py's own GPT, initialisation,
batches and learning-rate schedule, `torch.autocast`, a `GradScaler` for FP16,
`clip_grad_norm_`, fused AdamW and the loss read back every step, without process group,
checkpoints, evaluation or guards. Each pair runs the script and the loop as separate processes
one after the other (the order alternates from pair to pair), each timing its own steps after
the first two (compilation, allocation) and nothing else. The figure is the median, over the
pairs, of each pair's ratio: pairing keeps the ratio meaningful while the machine's speed drifts.

Both sides run with glibc's heap kept (`--heap kept`, the default): glibc's malloc hands the top
of its heap back to the operating system once enough of it is free, so a process that frees a
step's activations before it allocates the next step's page-faults them in again, step after
step. Whether that happens depends on which small tensor outlives the step, not on the work: a
loop that keeps its last loss in a variable until the next step is spared most of those page
faults, and runs faster for that alone. Fixed trim and mmap thresholds (GLIBC_TUNABLES) keep
freed memory in the heap for both sides alike; `--heap returned` measures with glibc's defaults.
On CUDA the caching allocator keeps device memory anyway; on CPU, jemalloc or tcmalloc do the
same (PyTorch's CPU performance tuning guide).

On a shared machine the wall clock also counts the time a process waited for a core. `--cpu`
compares CPU seconds instead: each side trains `--steps` (once to warm the process up, then
again) and three times as many in one process, and the difference of the last two runs' CPU time
(time.process_time) is the cost of the extra steps, whatever was set up or evaluated once.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
# glibc keeps up to 1 GiB free at the top of its heap, and serves blocks up to 32 MiB (its
# largest mmap threshold) from the heap instead of fresh mappings; other C libraries ignore it
KEPT_HEAP = "glibc.malloc.trim_threshold=1073741824:glibc.malloc.mmap_threshold=33554432"
SCRIPT = ROOT / "snippets" / "train.py"
WARM_STEPS = 2


def script():
    """Return snippets/train.py as the module `train`."""
    if "train" not in sys.modules:
        spec = importlib.util.spec_from_file_location("train", SCRIPT)
        module = importlib.util.module_from_spec(spec)
        sys.modules["train"] = module
        spec.loader.exec_module(module)
    return sys.modules["train"]


def config(argv: list[str]):
    """Return train.py's Config from train.py flags (`--precision fp32 --steps 60 ...`)."""
    train = script()
    parser = argparse.ArgumentParser(prog="train.py flags")
    for f in dataclasses.fields(train.Config):
        how = {"action": argparse.BooleanOptionalAction} if f.type is bool else {"type": f.type}
        parser.add_argument("--" + f.name.replace("_", "-"), default=f.default, **how)
    return train.Config(**vars(parser.parse_args(argv)))


def plain_loop(cfg) -> dict:
    """Train `cfg` in a plain loop on one process; return its losses and steady tokens/s."""
    train = script()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = train.load_text(cfg)[0]
    model = train.GPT(cfg).to(device)
    train.init_weights(model, cfg, device)
    if cfg.precision == "bf16-pure":
        model.to(torch.bfloat16)
    if cfg.compile:
        for block in model.layers:
            block.compile()
    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(cfg.precision)
    matrices = [p for p in model.parameters() if p.dim() >= 2]
    others = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": matrices}, {"params": others, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, cfg.lr, weight_decay=cfg.weight_decay, fused=True)
    scaler = torch.amp.GradScaler(device.type, enabled=cfg.precision == "fp16" and cfg.loss_scaling)
    losses, times = [], []
    for step in range(cfg.steps):
        start = time.perf_counter()
        for group in opt.param_groups:
            group["lr"] = train.lr_at(cfg, step)
        total = 0.0
        for micro in range(cfg.accum_steps):
            x, y = train.batch(data, cfg, step, micro, 0, 1, device)
            with torch.autocast(device.type, dtype=low or torch.float32, enabled=low is not None):
                loss = model(x, y) / cfg.accum_steps
            scaler.scale(loss).backward()
            total = total + loss.detach()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.max_norm or math.inf)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        losses.append(total.item())  # read back, as a loop that logs its loss does
        if step >= WARM_STEPS:
            times.append(time.perf_counter() - start)
    tokens = cfg.accum_steps * cfg.micro_batch * cfg.seq_len * len(times)
    return {"losses": losses, "tokens_per_s": tokens / sum(times) if times else None}


def cpu_per_step(kind: str, flags: list[str]) -> float:
    """Return the CPU seconds per optimizer step of `kind` ("script" or "plain") in this process:
    the CPU time of 3 * steps minus that of `steps` (after a first, warming run), over 2 * steps.
    """
    cfg = config(flags)
    costs = []
    for steps in (cfg.steps, cfg.steps, 3 * cfg.steps):  # the first warms this process up
        run = dataclasses.replace(cfg, steps=steps, print_every=0, eval_every=10**9)
        start = time.process_time()
        if kind == "script":
            with tempfile.TemporaryDirectory() as tmp:
                script().train(dataclasses.replace(run, ckpt_dir=tmp))
        else:
            plain_loop(run)
        costs.append(time.process_time() - start)
    return (costs[2] - costs[1]) / (2 * cfg.steps)


def _run(command: list[str], heap: str = "kept") -> subprocess.CompletedProcess:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=os.environ.get("CUDA_VISIBLE_DEVICES", ""))
    env.pop("RANK", None)  # one process, whatever the shell holds
    if heap == "kept":  # after the shell's own tunables, so that these two hold
        env["GLIBC_TUNABLES"] = ":".join(filter(None, [env.get("GLIBC_TUNABLES"), KEPT_HEAP]))
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}")
    return result


def paired(
    flags: list[str], pairs: int, cpu: bool = False, heap: str = "kept"
) -> list[tuple[float, float]]:
    """Return (train.py tokens/s, plain loop tokens/s) for each pair, run one after the other
    (per CPU second with `cpu`), both with glibc's heap `heap` ("kept" or "returned")."""
    cfg = config(flags)
    if cpu:
        return _paired_cpu(cfg, flags, pairs, heap)
    quiet = ["--print-every", "0", "--eval-every", str(cfg.steps)]
    out = []
    with tempfile.TemporaryDirectory(prefix="plain-loop-") as tmp:
        for i in range(pairs):
            log = Path(tmp) / f"train-{i}.jsonl"
            ckpt = ["--ckpt-dir", str(Path(tmp) / f"ckpt-{i}")]
            the_script = [
                sys.executable,
                str(SCRIPT),
                *flags,
                *quiet,
                *ckpt,
                "--log-file",
                str(log),
            ]
            the_loop = [sys.executable, "-m", "tools.plain_loop", "--plain", "--", *flags]
            speeds = {}
            for name, command in [("script", the_script), ("loop", the_loop)][:: 1 - 2 * (i % 2)]:
                printed = _run(command, heap).stdout
                if name == "script":
                    speeds[name] = json.loads(log.read_text().splitlines()[-1])["tokens_per_s"]
                else:
                    speeds[name] = json.loads(printed.splitlines()[-1])["tokens_per_s"]
            out.append((speeds["script"], speeds["loop"]))
            ratio = speeds["script"] / speeds["loop"]
            print(
                f"pair {i + 1}: train.py {speeds['script']:,.0f} tokens/s, plain loop "
                f"{speeds['loop']:,.0f} tokens/s, ratio {ratio:.3f}",
                flush=True,
            )
    return out


def _paired_cpu(cfg, flags: list[str], pairs: int, heap: str) -> list[tuple[float, float]]:
    tokens = cfg.accum_steps * cfg.micro_batch * cfg.seq_len  # per step
    out = []
    for i in range(pairs):
        speeds = {}
        for kind in ("script", "plain")[:: 1 - 2 * (i % 2)]:
            command = [sys.executable, "-m", "tools.plain_loop", "--cpu-of", kind, "--", *flags]
            seconds = json.loads(_run(command, heap).stdout.splitlines()[-1])["cpu_per_step"]
            speeds[kind] = tokens / seconds
        out.append((speeds["script"], speeds["plain"]))
        print(
            f"pair {i + 1}: train.py {speeds['script']:,.0f} tokens per CPU second, plain loop "
            f"{speeds['plain']:,.0f}, ratio {speeds['script'] / speeds['plain']:.3f}",
            flush=True,
        )
    return out


def main(argv: list[str] | None = None) -> float | None:
    parser = argparse.ArgumentParser(
        description="tokens/s of snippets/train.py against a plain loop, one process, paired.",
        epilog="Flags after -- go to train.py (and the loop): -- --precision fp32 --steps 60",
    )
    parser.add_argument("--pairs", type=int, default=5, help="pairs of runs (default: 5)")
    parser.add_argument("--cpu", action="store_true", help="compare CPU seconds, not wall time")
    parser.add_argument(
        "--heap",
        choices=("kept", "returned"),
        default="kept",
        help="glibc keeps freed memory for both sides (default), or returns it to the system",
    )
    parser.add_argument("--plain", action="store_true", help="run the plain loop once, alone")
    parser.add_argument("--cpu-of", choices=("script", "plain"), help="one side of --cpu, alone")
    args, flags = parser.parse_known_args(argv)
    flags = [f for f in flags if f != "--"]
    if args.plain:
        result = plain_loop(config(flags))
        print(json.dumps(result))
        return None
    if args.cpu_of:
        print(json.dumps({"cpu_per_step": cpu_per_step(args.cpu_of, flags)}))
        return None
    if args.pairs < 1:
        parser.error(f"--pairs must be at least 1, got {args.pairs}")
    tunables = f" (GLIBC_TUNABLES={KEPT_HEAP})" if args.heap == "kept" else ""
    print(f"glibc's heap {args.heap}{tunables}", flush=True)
    ratios = [a / b for a, b in paired(flags, args.pairs, args.cpu, args.heap)]
    median = statistics.median(ratios)
    print(f"median ratio train.py / plain loop over {len(ratios)} pairs: {median:.3f}")
    return median


if __name__ == "__main__":
    main()
