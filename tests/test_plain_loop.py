"""Chapter 7's plain-PyTorch loop (snippets/pipeline.py, section plain_loop) against Trainer.

The section's own code runs here, after the snippet's `imports` section, exactly as the page shows
it (and, for FP16, with its `dtype` line switched); its FP32 weights after the loop must equal
the FP32 master weights of gradflow_ref.pipeline.Trainer given the same seed, the same
micro-batches and the same hyperparameters. Tolerance: 1e-6 absolute, 0 relative (on the build
machine's CPU the two agree bit for bit). Last, tools/plain_loop.py's loop, the yardstick of
train.py's speed, against train.py on one process.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys

import pytest
import torch

from gradflow_ref.pipeline import PipelineConfig, Trainer, warmup_cosine
from tests._site import ROOT
from tests.test_copy_run import section

SNIPPET = "snippets/pipeline.py"
DTYPE_LINE = "dtype, steps, accum, segments = torch.bfloat16,"
SCALER = "torch.amp.GradScaler(device, enabled=dtype == torch.float16)"
ATOL, RTOL = 1e-6, 0.0


def run_loop(replace: dict[str, str] | None = None) -> dict:
    """Run the `imports` and `plain_loop` sections in a fresh namespace; return it."""
    code = section(SNIPPET, "plain_loop")
    for old, new in (replace or {}).items():
        assert code.count(old) == 1, f"plain_loop no longer holds {old!r} once"
        code = code.replace(old, new)
    ns: dict = {"__name__": "plain_loop"}
    exec(compile(section(SNIPPET, "imports"), SNIPPET, "exec"), ns)
    exec(compile(code, f"{SNIPPET}:plain_loop", "exec"), ns)
    return ns


def trainer_run(ns: dict, **overrides) -> Trainer:
    """Run Trainer for the loop's steps on the loop's seed and hyperparameters."""
    cfg = PipelineConfig(
        lr=ns["lr"],
        min_lr=ns["min_lr"],
        warmup_steps=ns["warmup"],
        total_steps=ns["total"],
        max_norm=ns["max_norm"],
        dtype=ns["dtype"],
        segments=ns["segments"],
        **overrides,
    )
    ns["gen"].manual_seed(5)  # the seed the section draws its micro-batches from
    trainer = Trainer(ns["make_model"](), cfg)
    for _ in range(ns["steps"]):
        trainer.step([ns["make_batch"]() for _ in range(ns["accum"])])
    return trainer


def assert_same_weights(ns: dict, trainer: Trainer) -> None:
    params = list(ns["model"].parameters())
    assert len(params) == len(trainer.master.params)
    for p, m in zip(params, trainer.master.params):
        assert p.dtype == m.dtype == torch.float32
        torch.testing.assert_close(p.detach(), m.detach(), atol=ATOL, rtol=RTOL)


def test_plain_loop_bf16_equals_trainer():
    ns = run_loop()
    assert ns["dtype"] == torch.bfloat16 and not ns["scaler"].is_enabled()
    assert_same_weights(ns, trainer_run(ns))


def test_plain_loop_fp16_with_grad_scaler_equals_trainer():
    ns = run_loop({DTYPE_LINE: "dtype, steps, accum, segments = torch.float16,"})
    assert ns["scaler"].is_enabled()
    trainer = trainer_run(ns)
    assert_same_weights(ns, trainer)
    assert ns["scaler"].get_scale() == trainer.scaler.get_scale()


def test_plain_loop_does_not_step_the_schedule_on_a_skipped_fp16_step():
    # a first loss scale of 2**24 overflows FP16 until backoff has halved it four times
    scale = 2.0**24
    ns = run_loop(
        {
            DTYPE_LINE: "dtype, steps, accum, segments = torch.float16,",
            SCALER: SCALER[:-1] + f", init_scale={scale})",
        }
    )
    trainer = trainer_run(ns, init_scale=scale)
    assert 0 < trainer.scaler.skipped_steps < ns["steps"]
    assert_same_weights(ns, trainer)
    taken = ns["steps"] - trainer.scaler.skipped_steps
    want = warmup_cosine(taken, ns["lr"], ns["warmup"], ns["total"], ns["min_lr"])
    assert ns["schedule"].get_last_lr()[0] == pytest.approx(want, rel=1e-12)
    assert trainer.schedule.get_last_lr()[0] == pytest.approx(want, rel=1e-12)


def test_plain_loop_steps_the_schedule_once_per_optimizer_step():
    ns = run_loop()
    want = warmup_cosine(ns["steps"], ns["lr"], ns["warmup"], ns["total"], ns["min_lr"])
    assert ns["schedule"].get_last_lr()[0] == pytest.approx(want, rel=1e-12)
    assert ns["opt"].state[next(ns["model"].parameters())]["step"].item() == ns["steps"]


# ---- tools/plain_loop.py: the plain loop train.py's speed is measured against computes what
# train.py computes on one process, so the two runs it times differ in overhead only


PLAIN_VS_SCRIPT = """
import json, sys
from tools.plain_loop import config, plain_loop, script
flags = sys.argv[1:]
plain = plain_loop(config(flags))["losses"]
train = script()
log = train.train(config(flags + ["--print-every", "0", "--ckpt-dir", "unused"]))["log"]
print(json.dumps({"plain": plain, "script": [r["loss"] for r in log]}))
"""


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_plain_loop_tool_trains_as_train_py_on_one_process(precision, tmp_path):
    flags = ["--n-layers", "2", "--hidden", "32", "--seq-len", "32", "--steps", "4"]
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", PLAIN_VS_SCRIPT, *flags, "--precision", precision],
        cwd=ROOT,
        env=dict(os.environ, OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES=""),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    losses = json.loads(result.stdout.splitlines()[-1])
    assert len(losses["plain"]) == 4
    assert losses["plain"] == losses["script"]  # bit for bit: the same computation


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="GLIBC_TUNABLES is glibc's")
def test_plain_loop_kept_heap_spares_train_py_its_page_faults(tmp_path):
    # the tool's default environment keeps glibc from handing each step's memory back to the
    # system: train.py then faults far fewer pages in (on the build machine about 3x fewer)
    from tools import plain_loop

    faults = {}
    for heap in ("returned", "kept"):
        command = [sys.executable, str(plain_loop.SCRIPT), "--steps", "40", "--print-every", "0"]
        command += ["--eval-every", "40", "--ckpt-dir", str(tmp_path / heap)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
        plain_loop._run(command, heap)
        faults[heap] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before
    assert faults["kept"] < 0.6 * faults["returned"], faults
