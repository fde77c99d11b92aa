"""tools.bench: the host-speed figure printed beside the timings. tools.bench_gpu: model FLOPs
and MFU, the SDPA block, the sections' results, snippets/train.py as a subprocess, and the
wheels a GPU host without network installs."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import zipfile
from dataclasses import replace

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from gradflow_ref.hardware import GPUS
from gradflow_ref.memory import MemoryConfig
from tools import bench_gpu
from tools.bench import host_speed

CPU = torch.device("cpu")
TINY = dict(n_layers=2, hidden=32, n_heads=2, seq_len=16, micro_batch=2, vocab=64)
QUICK = replace(bench_gpu.SIZES["quick"], steps=1)
# dynamo reads a non-leaf tensor's .grad while it traces a checkpointed block
TRACING = "ignore:The .grad attribute of a Tensor that is not a leaf:UserWarning"


def test_host_speed_counts_steps_on_one_thread_and_restores_the_thread_count(monkeypatch):
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    seen = []
    backward = torch.Tensor.backward

    def counted(self, *args, **kwargs):
        seen.append(torch.get_num_threads())
        return backward(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "backward", counted)
    try:
        speed = host_speed(0.2)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert seen and set(seen) == {1}, "the steps ran on more than one thread"
    assert 0.5 * len(seen) / 0.2 < speed <= 1.5 * len(seen) / 0.2


# ------------------------------------------------------------------ FLOPs, MFU, the SDPA block


def test_flops_per_token_is_what_torch_counts_in_a_training_step():
    cfg = MemoryConfig(dropout=False, **TINY)
    model = bench_gpu.gpt_model(cfg, CPU)  # written-out attention: every product is a matmul
    x, y = bench_gpu._batch(cfg, CPU, seed=0)
    with FlopCounterMode(display=False) as counter:
        bench_gpu._loss_fn(model(x), y).backward()
    tokens = cfg.micro_batch * cfg.seq_len
    assert counter.get_total_flops() == bench_gpu.flops_per_token(TINY) * tokens


@pytest.mark.parametrize(
    ("name", "card"),
    [
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H200", "H200 SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
        ("NVIDIA H100 PCIe", None),
        ("NVIDIA H200 NVL", None),
        ("NVIDIA A100-PCIE-40GB", None),
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_stated_peak_is_the_datasheets_dense_bf16_figure_of_known_parts(name, card):
    peak = bench_gpu.stated_peak(name)
    if card is None:
        assert peak is None
    else:
        assert peak["card"] == card
        assert peak["bf16_flops"] == GPUS[card].tflops["bf16"] * 1e12
        assert peak["source"] == GPUS[card].source


def test_mfu_is_model_flops_per_second_over_the_peak():
    assert bench_gpu.mfu(1000.0, 2e9, {"bf16_flops": 4e12}) == 0.5
    assert bench_gpu.mfu(1000.0, 2e9, None) is None


def test_sdpa_block_computes_what_the_written_out_block_computes():
    cfg = MemoryConfig(dropout=False, **TINY)
    x, _ = bench_gpu._batch(cfg, CPU, seed=0)
    plain = bench_gpu.gpt_model(cfg, CPU).double()
    fused = bench_gpu.gpt_model(cfg, CPU, attention="sdpa").double()
    torch.testing.assert_close(fused(x), plain(x), rtol=1e-12, atol=1e-12)


def test_gpt_model_refuses_an_unknown_attention():
    with pytest.raises(ValueError, match=r"`attention` must be one of \['unfused', 'sdpa'\]"):
        bench_gpu.gpt_model(MemoryConfig(dropout=False, **TINY), CPU, attention="flash")


# ------------------------------------------------------------------ the sections on a CPU


def test_training_step_times_every_precision_with_both_attentions():
    peak = {"card": None, "bf16_flops": 1e12, "source": "test"}
    result = bench_gpu.training_step(CPU, QUICK, peak)
    rows = result["rows"]
    want = {n + s for n in bench_gpu.VARIANTS for s in bench_gpu.ATTENTIONS.values()}
    assert set(rows) == want
    per_token = bench_gpu.flops_per_token(QUICK.gpt)
    assert result["flops_per_token"] == per_token
    for name, row in rows.items():
        assert "error" not in row, row.get("error")
        assert row["attention"] == ("sdpa" if name.endswith("_sdpa") else "unfused")
        assert row["mfu"] == row["tokens_per_second"] * per_token / 1e12
        assert row["peak_bytes"] is None  # a CPU has no allocator statistics


@pytest.mark.filterwarnings(TRACING)
def test_gpt_checkpointing_adds_compiled_rows():
    result = bench_gpu.gpt_checkpointing(CPU, QUICK)
    compiled = {f"{m}_compiled" for m in bench_gpu.COMPILED_MODES}
    assert set(result["rows"]) == set(bench_gpu.CHECKPOINT_MODES) | compiled
    assert result["compile"] == "aot_eager"
    for row in result["rows"].values():
        assert "error" not in row, row.get("error")
        assert row["mfu"] is None  # no stated peak


def test_fp8_training_without_torchao_is_skipped_with_the_staging_command(monkeypatch):
    def missing(name):
        raise ImportError(f"No module named {name!r}")

    monkeypatch.setattr(bench_gpu.importlib, "import_module", missing)
    result = bench_gpu.fp8_training(CPU, QUICK)
    assert set(result) == {"skipped"}
    assert "make gpu-wheels" in result["skipped"] and "torchao==0.18.*" in result["skipped"]


def test_fp8_training_trains_bf16_and_both_recipes_from_one_start():
    pytest.importorskip("torchao.float8")
    result = bench_gpu.fp8_training(CPU, QUICK)
    runs = result["runs"]
    assert set(runs) == {"bf16", "tensorwise", "rowwise"}
    for run in runs.values():
        assert "error" not in run, run.get("error")
        assert len(run["losses"]) == QUICK.fp8_steps
        assert all(math.isfinite(loss) for loss in run["losses"])
        # FP8 rounding moves the first loss of one model on one batch by little
        assert run["losses"][0] == pytest.approx(runs["bf16"]["losses"][0], abs=0.05)
    assert runs["bf16"]["converted"] == []
    blocks = QUICK.fp8_gpt["n_layers"]
    assert len(runs["tensorwise"]["converted"]) == len(runs["rowwise"]["converted"]) == 4 * blocks


# ------------------------------------------------------------------ snippets/train.py


def test_script_command_passes_only_the_options_the_script_lists():
    flags = {"steps", "seed", "compile", "no-compile", "log"}
    values = {"steps": 5, "hidden": 64, "compile": False, "log": "x.jsonl", "peak_flops": None}
    args, missing = bench_gpu.script_command(flags, values)
    assert args == ["--steps", "5", "--no-compile", "--log", "x.jsonl"]
    assert missing == ["hidden"]
    args, missing = bench_gpu.script_command({"steps"}, {"compile": True, "steps": 2})
    assert (args, missing) == (["--steps", "2"], ["compile"])
    assert bench_gpu.script_command({"steps"}, {"compile": False}) == ([], [])


@pytest.mark.parametrize(
    ("line", "want"),
    [
        (
            "step 3, loss 5.41, grad_norm 0.93, lr 0.00015, loss_scale 1, tokens_per_s 1.2e+04\n",
            {
                "step": 3,
                "loss": 5.41,
                "grad_norm": 0.93,
                "lr": 0.00015,
                "loss_scale": 1,
                "tokens_per_s": 1.2e4,
            },
        ),  # fmt: skip
        ("step 9 | loss 4.25 | mfu 0.31\n", {"step": 9, "loss": 4.25, "mfu": 0.31}),
        ("rank 0/1: [1, 2, 3] B of params, grads, AdamW states; peak 12 MiB\n", None),
        ("step 4, val_loss 5.1\n", None),
    ],
)
def test_parse_progress_reads_a_progress_line(line, want):
    assert bench_gpu.parse_progress(line) == want


def test_steady_rate_leaves_out_the_start_and_the_last_line():
    progress = [(10.0, 0), (10.5, 1), (11.0, 2), (11.5, 3), (12.0, 4), (20.0, 5)]
    assert bench_gpu.steady_rate(progress, 100, 1 / 3) == 2 * 100 / 1.0
    assert bench_gpu.steady_rate(progress[:3], 100, 1 / 3) is None


@pytest.mark.long(12)
def test_train_script_trains_on_a_cpu_and_reports_what_it_measured():
    result = bench_gpu.train_script(CPU, QUICK)
    run = result["runs"]["eager"]
    assert run["returncode"] == 0, run.get("output_tail")
    assert run["steps_done"] == QUICK.script_steps
    assert all(math.isfinite(loss) for loss in run["losses"])
    assert run["losses"][0] == pytest.approx(math.log(256), abs=0.2)  # bytes, uniform at first
    assert run["tokens_per_second"] > 0 and run["peak_mib"] > 0
    assert set(result["runs"]["compiled"]) == {"skipped"}  # no --compile option, or --quick
    assert result["reference"] == "eager" and result["agreement"] == {}


FAKE_TRAIN = """
import argparse, json, os, time
parser = argparse.ArgumentParser()
for name in ("steps", "seed", "print-every", "eval-every", "log-file", "peak-flops",
             "max-seconds", "n-layers", "hidden", "n-heads", "seq-len", "micro-batch", "data"):
    parser.add_argument("--" + name)
parser.add_argument("--compile", action=argparse.BooleanOptionalAction)
args = parser.parse_args()
cpu = os.environ.get("CUDA_VISIBLE_DEVICES") == ""
with open(args.log_file, "a") as log:
    for step in range(int(args.steps)):
        loss = 5.5 - 0.1 * step + 0.001 * step * cpu + 0.002 * step * bool(args.compile)
        print(json.dumps({"step": step, "loss": loss}), file=log)
        print(f"step {step}, loss {loss:.6g}", flush=True)
        time.sleep(0.01)
    summary = {"peak_mib": 50 if cpu else 100, "tokens_per_s": 1234.0, "mfu": 0.5}
    print(json.dumps(summary), file=log)
"""


def test_train_script_on_a_gpu_reads_its_log_and_compares_with_the_cpu(monkeypatch, tmp_path):
    (tmp_path / "train.py").write_text(FAKE_TRAIN)
    monkeypatch.setattr(bench_gpu, "TRAIN_SCRIPT", tmp_path / "train.py")
    monkeypatch.setattr(bench_gpu, "LAUNCH", [sys.executable])  # torchrun adds only seconds
    size = replace(QUICK, script_compile=True)
    result = bench_gpu.train_script(torch.device("cuda"), size)  # no GPU needed: a stand-in
    runs = result["runs"]
    assert result["reference"] == "cpu"
    for name, steps in (("eager", size.script_steps), ("compiled", size.script_steps), ("cpu", 4)):
        assert runs[name]["log"] == "jsonl" and runs[name]["missing_flags"] == []
        assert runs[name]["steps_done"] == steps
        assert runs[name]["script_tokens_per_second"] == 1234.0
        assert runs[name]["script_mfu"] == 0.5
    assert "--compile" in runs["compiled"]["args"] and "--no-compile" in runs["eager"]["args"]
    assert (runs["eager"]["peak_mib"], runs["cpu"]["peak_mib"]) == (100, 50)
    assert runs["eager"]["tokens_per_second"] > 0
    want = {"eager": 0.001, "compiled": 0.001}  # per step: 0 - 0.001, and 0.002 - 0.001
    for name, per_step in want.items():
        agreement = result["agreement"][name]
        assert agreement["steps"] == size.agree_steps
        assert agreement["abs_diff"] == pytest.approx([per_step * s for s in range(4)])


# ------------------------------------------------------------------ the cuda-marked tests


def test_cuda_test_files_are_the_files_with_a_cuda_marker(tmp_path):
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_a.py").write_text(
        "import pytest\n\n\n@pytest.mark.cuda\ndef test_x():\n    pass\n"
    )
    (tests / "test_b.py").write_text("# @pytest.mark.cuda is how a GPU test is marked\n")
    (tests / "test_c.py").write_text("import pytest\n\npytestmark = pytest.mark.cuda\n")
    assert bench_gpu.cuda_test_files(tests) == ["tests/test_a.py", "tests/test_c.py"]
    assert "tests/test_checkpointing.py" in bench_gpu.cuda_test_files()


# ------------------------------------------------------------------ wheels for an offline host


def _wheel(folder, name="gfdummy", version="1.0"):
    """A pure-Python wheel holding one empty module `name`."""
    folder.mkdir(parents=True, exist_ok=True)
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": "",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/RECORD": "",
    }  # fmt: skip
    path = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for arcname, text in files.items():
            wheel.writestr(arcname, text)
    return path


def test_stage_wheels_downloads_the_pinned_wheels_without_dependencies(monkeypatch, tmp_path):
    seen = []

    def pip(command, **kwargs):
        seen.append(command)
        _wheel(tmp_path, "torchao", "0.18.0")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(bench_gpu.subprocess, "run", pip)
    staged = bench_gpu.stage_wheels(tmp_path)
    (command,) = seen
    assert command[:4] == [sys.executable, "-m", "pip", "download"]
    assert {"--no-deps", "--only-binary=:all:", "torchao==0.18.*"} <= set(command)
    assert command[command.index("--dest") + 1] == str(tmp_path)
    assert [p.name for p in staged] == ["torchao-0.18.0-py3-none-any.whl"]


def test_stage_wheels_says_when_pip_cannot_download(monkeypatch, tmp_path):
    failed = subprocess.CompletedProcess([], 1, "", "ERROR: No matching distribution found")
    monkeypatch.setattr(bench_gpu.subprocess, "run", lambda command, **kwargs: failed)
    with pytest.raises(RuntimeError, match=r"is PyPI reachable\?(.|\n)*No matching distribution"):
        bench_gpu.stage_wheels(tmp_path)


def test_install_wheels_installs_from_the_folder_without_the_network(tmp_path):
    _wheel(tmp_path / "wheels")
    site = tmp_path / "site"
    result = bench_gpu.install_wheels(tmp_path / "wheels", ("gfdummy==1.*",), target=site)
    assert result["message"] is None, result["message"]
    assert result["installed"] == ["gfdummy==1.*"]
    assert (site / "gfdummy" / "__init__.py").exists()


def test_install_wheels_without_wheels_says_how_to_stage_them(tmp_path):
    result = bench_gpu.install_wheels(tmp_path / "wheels", ("gfdummy==1.*",))
    assert result["installed"] == []
    assert "gfdummy==1.* not installed" in result["message"]
    assert "make gpu-wheels" in result["message"]


def test_install_wheels_leaves_what_is_installed_alone(monkeypatch, tmp_path):
    def pip(command, **kwargs):
        raise AssertionError(f"pip ran: {command}")

    monkeypatch.setattr(bench_gpu.subprocess, "run", pip)
    result = bench_gpu.install_wheels(tmp_path, ("torch==*",))
    assert result["installed"] == [] and result["message"] is None


def test_install_wheels_beside_a_read_only_environment_puts_them_on_the_path(monkeypatch, tmp_path):
    _wheel(tmp_path)
    seen = []

    def pip(command, **kwargs):
        seen.append(command)
        return subprocess.CompletedProcess(command, int("--target" not in command), "", "")

    monkeypatch.setattr(bench_gpu.subprocess, "run", pip)
    monkeypatch.setattr(bench_gpu.tempfile, "mkdtemp", lambda prefix: str(tmp_path / "site"))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", "elsewhere")
    result = bench_gpu.install_wheels(tmp_path, ("gfdummy==1.*",))
    assert [("--target" in c) for c in seen] == [False, True]
    assert result["message"] is None and result["target"] == str(tmp_path / "site")
    assert sys.path[0] == str(tmp_path / "site")
    assert (
        bench_gpu.os.environ["PYTHONPATH"] == f"{tmp_path / 'site'}{bench_gpu.os.pathsep}elsewhere"
    )


def test_install_wheels_reports_a_failed_install(monkeypatch, tmp_path):
    _wheel(tmp_path)
    failed = subprocess.CompletedProcess([], 1, "", "ERROR: No matching distribution for gfother")
    monkeypatch.setattr(bench_gpu.subprocess, "run", lambda command, **kwargs: failed)
    result = bench_gpu.install_wheels(tmp_path, ("gfother==2.*",))
    assert "--no-index --find-links" in result["message"]
    assert "No matching distribution for gfother" in result["message"]


# ------------------------------------------------------------------ the command


def test_main_writes_device_versions_date_and_the_sections_it_ran(tmp_path):
    only = "training_step,fp8_training"
    argv = ["--device", "cpu", "--quick", "--no-tests", "--only", only, "--out", str(tmp_path)]
    result = bench_gpu.main([*argv, "--wheels", str(tmp_path / "no-wheels")])
    (path,) = tmp_path.glob("bench-cpu-*-quick-partial.json")
    assert json.loads(path.read_text()) == json.loads(json.dumps(result))
    assert result["versions"]["torch"] == torch.__version__
    assert result["date"] == result["started"][:10] and result["peak"] is None
    assert set(result["section_seconds"]) == {"training_step", "fp8_training"}
    assert "checkpointing" not in result
    assert ("skipped" in result["fp8_training"]) == (result["versions"]["torchao"] is None)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--only", "training_step,fp4"], r"--only takes sections of .*'fp4'"),
        (["--budget", "60"], "--budget must be more than 90 seconds, got 60.0"),
        (["--peak-tflops", "0"], "--peak-tflops must be positive, got 0.0"),
    ],
)
def test_main_refuses_bad_options(argv, message):
    with pytest.raises(SystemExit, match=message):
        bench_gpu.main(["--device", "cpu", "--quick", *argv])


# ------------------------------------------------------------------ on a GPU


@pytest.mark.cuda
def test_training_step_on_cuda_holds_less_for_backward_with_sdpa():
    size = replace(QUICK, gpt=dict(TINY, seq_len=256, micro_batch=4))
    rows = bench_gpu.training_step(torch.device("cuda"), size)["rows"]
    for name in ("fp32", "autocast_bf16", "trainer_bf16"):
        assert rows[f"{name}_sdpa"]["forward_held_bytes"] < rows[name]["forward_held_bytes"]
        assert rows[name]["peak_bytes"] > 0


@pytest.mark.cuda
@pytest.mark.filterwarnings(  # torchao's Float8Linear reads the autocast dtype the old way
    "ignore:torch.get_autocast_gpu_dtype\\(\\) is deprecated"
)
def test_fp8_training_on_cuda_trains_every_recipe():
    pytest.importorskip("torchao.float8")
    runs = bench_gpu.fp8_training(torch.device("cuda"), QUICK)["runs"]
    for run in runs.values():
        assert "error" not in run, run.get("error")
        assert run["peak_bytes"] > 0 and all(math.isfinite(x) for x in run["losses"])
