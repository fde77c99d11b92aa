"""snippets/train.py, the reference training script, run as its readers run it.

`python train.py` and `torchrun --standalone --nproc-per-node 2 train.py` (CPU, gloo) on a small
GPT, warnings as errors: one and two processes with the same global batch train alike, each rank
holds exactly the bytes the sharding calculator predicts, a run resumed from its checkpoint
continues as the uninterrupted run, and the file copied alone into an empty folder runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

from gradflow_ref.memory import GPT, MemoryConfig
from gradflow_ref.sharding import predict_fsdp2
from tests._site import ROOT

SCRIPT = ROOT / "snippets" / "train.py"
SMALL = ["--n-layers", "2", "--hidden", "64", "--n-heads", "4", "--seq-len", "64"]
SMALL += ["--print-every", "1", "--eval-every", "4"]
LINE = re.compile(r"^step \d+, .*$", re.M)
HELD = re.compile(r"^rank (\d+)/(\d+): \[(\d+), (\d+), (\d+)\] B", re.M)
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone"]


def run(args: list[str], nproc: int = 1, cwd=ROOT, script=SCRIPT, **env_vars) -> str:
    """Run train.py (under torchrun when nproc > 1); return what it printed."""
    launch = [sys.executable] if nproc == 1 else [*TORCHRUN, f"--nproc-per-node={nproc}"]
    env = dict(os.environ, PYTHONWARNINGS="error", OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    env.update(env_vars)
    with tempfile.TemporaryDirectory() as tmp:  # torchrun leaves its log folder in TMPDIR
        result = subprocess.run(
            [*launch, str(script), *SMALL, *args],
            cwd=cwd,
            env=dict(env, TMPDIR=tmp),
            capture_output=True,
            text=True,
            timeout=240,
        )
    assert result.returncode == 0, f"train.py {args} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def steps(stdout: str) -> dict[int, dict[str, float]]:
    """Return {step: {field: value}} from train.py's progress lines."""
    out = {}
    for line in LINE.findall(stdout):
        fields = dict(part.split(" ") for part in line.split(", "))
        out[int(fields["step"])] = {k: float(v) for k, v in fields.items()}
    return out


@pytest.fixture(scope="module")
def train():
    """snippets/train.py imported as a module, as the arena imports it."""
    from gradflow_site.pages.train import script

    return script()


@pytest.mark.long(60)
@pytest.mark.parametrize("precision, tolerance", [("fp32", 1e-5), ("bf16", 2e-2)])
def test_train_one_and_two_processes_train_alike(precision, tolerance):
    # the same 8 sequences per step: 8 on one process, or 4 on each of two
    one = steps(run(["--steps", "8", "--micro-batch", "8", "--precision", precision]))
    two = steps(run(["--steps", "8", "--micro-batch", "4", "--precision", precision], nproc=2))
    assert sorted(one) == sorted(two) == list(range(8))
    gap = max(abs(one[s]["loss"] - two[s]["loss"]) for s in one)
    assert gap <= tolerance, f"{precision}: losses of 1 and 2 processes differ by {gap}"
    assert abs(one[7]["val_loss"] - two[7]["val_loss"]) <= tolerance
    assert one[7]["loss"] < one[0]["loss"] - 0.5  # it trains


@pytest.mark.long(40)
def test_train_ranks_hold_what_the_sharding_calculator_predicts():
    out = run(["--steps", "2", "--micro-batch", "4", "--precision", "bf16"], nproc=2)
    held = {int(m[0]): [int(b) for b in m[2:]] for m in HELD.findall(out)}
    assert sorted(held) == [0, 1], out
    shapes = [p.shape for p in GPT(MemoryConfig(2, 64, 4, 64, 1, 256)).parameters()]
    for rank, (params, grads, states) in held.items():
        predicted = predict_fsdp2(shapes, 2, rank)
        assert (params, grads, states) == (
            predicted.parameters,
            predicted.gradients,
            predicted.optimizer_states,
        )


@pytest.mark.long(60)
def test_train_resumed_run_continues_as_the_uninterrupted_run(tmp_path):
    # a learning rate at which FP16 overflows at step 2: the checkpoint holds a lowered scale
    ckpt = ["--ckpt-dir", str(tmp_path), "--precision", "fp16", "--lr", "3e-2", "--warmup", "2"]
    full = steps(run(["--steps", "8", "--save-every", "4", "--micro-batch", "4", *ckpt], nproc=2))
    assert full[4]["loss_scale"] < full[0]["loss_scale"]
    shutil.rmtree(tmp_path / "step-000008")  # as if the run had stopped after step 4
    for nproc, micro_batch, rel in ((2, "4", 1e-6), (1, "8", 1e-3)):  # same global batch
        resumed = steps(
            run(["--steps", "8", "--resume", "--micro-batch", micro_batch, *ckpt], nproc)
        )
        assert sorted(resumed) == [4, 5, 6, 7], nproc
        for s in resumed:
            for field in ("loss", "lr", "loss_scale", "grad_norm"):
                assert resumed[s][field] == pytest.approx(full[s][field], rel=rel), (
                    nproc,
                    s,
                    field,
                )


def test_train_resumed_after_its_last_step_trains_nothing(tmp_path):
    ckpt = ["--ckpt-dir", str(tmp_path), "--precision", "fp32", "--steps", "2", "--save-every", "2"]
    run(ckpt)
    out = run([*ckpt, "--resume"])
    assert not steps(out) and HELD.search(out)


@pytest.mark.long(30)
def test_train_ranks_stop_together_when_out_of_time():
    out = run(["--steps", "50", "--max-seconds", "0.001", "--micro-batch", "4"], nproc=2)
    assert sorted(steps(out)) == [0] and "val_loss" in steps(out)[0]
    assert len(HELD.findall(out)) == 2


def test_train_runs_copied_alone_into_an_empty_folder(tmp_path):
    copy = tmp_path / "train.py"
    shutil.copy(SCRIPT, copy)
    # nothing of the checkout on the path: only the installed gradflow_ref
    out = run(["--steps", "2", "--precision", "fp32"], cwd=tmp_path, script=copy, PYTHONPATH="")
    assert sorted(steps(out)) == [0, 1]
    assert HELD.search(out)


def test_train_script_is_under_250_lines():
    assert len(SCRIPT.read_text(encoding="utf-8").splitlines()) < 250


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("precision", "bf32", "`precision` must be one of"),
        ("checkpointing", "some", "`checkpointing` must be one of"),
        ("micro_batch", 0, "`micro_batch` must be at least 1, got 0"),
        ("eval_every", 0, "`eval_every` must be at least 1, got 0"),
    ],
)
def test_train_config_rejects_bad_values(train, field, value, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        train.Config(**{field: value})


def test_train_lr_warms_up_then_decays_to_a_tenth(train):
    cfg = train.Config(lr=1e-3, warmup=10, steps=110)
    lrs = [train.lr_at(cfg, s) for s in range(cfg.steps)]
    assert lrs[0] == pytest.approx(1e-4) and lrs[9] == pytest.approx(1e-3)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:]))
    assert train.lr_at(cfg, cfg.steps) == pytest.approx(1e-4)  # where the cosine ends
