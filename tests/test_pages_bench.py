"""Builders of the committed benchmark runs (gradflow_site/pages/bench.py), on the committed
runs and on a synthetic run in the newer layout (SDPA rows, MFU, compiled checkpointing, FP8,
train.py) that lives in a temporary folder and is never published."""

from __future__ import annotations

import copy
import json
import shutil
import types
from pathlib import Path

import pytest

from gradflow_ref import benchmarks
from gradflow_ref.benchmarks import committed_runs
from gradflow_site.pages import bench, bench_gpu

RESULTS = Path(__file__).resolve().parents[1] / "results"


@pytest.fixture(scope="module")
def gpu_run():
    return bench.run("cuda")


def _synthetic(old: dict) -> dict:
    """`old` in the newer layout, with invented numbers: tests only."""
    r = copy.deepcopy(old)
    del r["file"]
    r |= {"device": "Test GPU", "date": "2099-01-01", "peak": {"bf16_flops": 1e15}}
    r["versions"] = {"torch": r["torch"], "cuda": r["cuda"], "torchao": "0.18.0", "triton": None}
    rows = r["training_step"]["rows"]
    for name in list(rows):
        seconds = rows[name]["step_seconds"] * 0.75
        rows[name + "_sdpa"] = rows[name] | {"step_seconds": seconds, "attention": "sdpa"}
    for x in rows.values():
        x["tokens_per_second"] = 8192 / x["step_seconds"]
        x["mfu"] = x["tokens_per_second"] * 1.6e9 / 1e15
    modes = r["gpt_checkpointing"]["rows"]
    for mode in ("none", "block", "selective"):
        modes[f"{mode}_compiled"] = modes[mode] | {"step_seconds": modes[mode]["step_seconds"] / 2}
    curves = {"bf16": (0.050, 0.0), "tensorwise": (0.040, 0.01), "rowwise": (0.045, 0.005)}
    r["fp8_training"] = {"torchao": "0.18.0", "runs": {}}
    for name, (seconds, gap) in curves.items():
        losses = [5.5 - 3 * i / 300 + gap for i in range(300)]
        r["fp8_training"]["runs"][name] = {
            "step_seconds": seconds,
            "tokens_per_second": 8192 / seconds,
            "mfu": 0.4,
            "peak_bytes": 20 * 2**30,
            "losses": losses,
            "final_loss": sum(losses[-30:]) / 30,
            "converted": [] if name == "bf16" else ["1.qkv"],
        }
    script = {"returncode": 0, "steps_done": 200, "peak_mib": 900.0, "mfu": 0.1}
    r["train_script"] = {
        "reference": "cpu",
        "runs": {
            "eager": script | {"tokens_per_second": 5e5, "losses": [5.5, 5.4, 5.3, 5.2]},
            "compiled": script | {"tokens_per_second": 9e5, "losses": [5.5, 5.4, 5.3, 5.21]},
            "cpu": script | {"tokens_per_second": 2e4, "losses": [5.5, 5.4, 5.3], "mfu": None},
        },
        "agreement": {
            "eager": {"steps": 3, "abs_diff": [0, 0, 0.002], "max_abs_diff": 0.002},
            "compiled": {"steps": 3, "abs_diff": [0, 0, 0.003], "max_abs_diff": 0.003},
        },
    }
    return r


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """results/ copied into a temporary folder that committed_runs reads instead."""
    shutil.copytree(RESULTS, tmp_path / "committed")
    monkeypatch.setattr(benchmarks, "resources", types.SimpleNamespace(files=lambda _: tmp_path))
    return tmp_path / "committed"


@pytest.fixture
def new_run(folder, gpu_run):
    path = folder / "bench-cuda-test-gpu.json"
    path.write_text(json.dumps(_synthetic(gpu_run)), encoding="utf-8")
    return bench.run("cuda")


def test_run_is_the_newest_committed_run_of_its_device(folder, gpu_run):
    assert bench.run("cuda") == committed_runs("cuda")[0] == gpu_run
    assert bench.run("cpu")["device_type"] == "cpu"
    (folder / "bench-cuda-test-gpu.json").write_text(json.dumps(_synthetic(gpu_run)))
    assert bench.run("cuda")["file"] == "bench-cuda-test-gpu.json"
    assert bench.run("cuda", needs="fp8_training")["file"] == "bench-cuda-test-gpu.json"


def test_run_names_the_section_no_committed_run_measured(gpu_run):
    with pytest.raises(ValueError, match=r"with a measured 'fp8_training' section.*bench_gpu"):
        bench.run("cuda", needs="fp8_training")


def test_run_names_the_command_when_no_run_is_committed(monkeypatch):
    monkeypatch.setattr(bench, "committed_runs", lambda device_type: [])
    with pytest.raises(ValueError, match=r"no committed benchmark on 'cuda'.*tools\.bench_gpu"):
        bench.run("cuda")


def test_label_names_device_versions_date_and_file(gpu_run):
    label = bench.label(gpu_run)
    for part in (gpu_run["device"], gpu_run["torch"], f"CUDA {gpu_run['cuda']}", gpu_run["date"]):
        assert part in label
    assert label.endswith(f"results/{gpu_run['file']}")
    assert "thread" in bench.label(bench.run("cpu"))


def test_ratio_divides_one_rows_field_by_anothers(gpu_run):
    rows = gpu_run["training_step"]["rows"]
    want = rows["fp32"]["step_seconds"] / rows["autocast_bf16"]["step_seconds"]
    assert bench.ratio(gpu_run, "training_step", "fp32", "autocast_bf16") == want


def test_row_refuses_a_row_that_failed_when_measured(gpu_run):
    broken = copy.deepcopy(gpu_run)
    broken["training_step"]["rows"]["tf32"] = {"error": "CUDA out of memory"}
    with pytest.raises(ValueError, match="no measured 'training_step' row 'tf32'"):
        bench.row(broken, "training_step", "tf32")
    with pytest.raises(ValueError, match="row 'int4'"):
        bench.row(gpu_run, "training_step", "int4")


def test_sweep_ratio_is_time_at_k_over_time_without(gpu_run):
    rows = {r["k"]: r for r in gpu_run["checkpointing"]["rows"]}
    assert bench.sweep_ratio(gpu_run, 8) == rows[8]["seconds"] / rows[64]["seconds"]
    with pytest.raises(ValueError, match="`k` must be one of"):
        bench.sweep_ratio(gpu_run, 3)


@pytest.mark.parametrize(
    ("builder", "names"),
    [
        (bench.step_table, bench.STEP_NAMES.values()),
        (bench.checkpoint_table, bench.MODE_NAMES.values()),
    ],
)
def test_tables_have_a_row_per_variant(gpu_run, builder, names):
    text = builder(gpu_run)
    assert text.count("\n") == 2 + len(list(names))  # header, rule, one line per row
    for name in names:
        assert f"| {name} |" in text


def test_step_table_puts_fp32_at_speed_one(gpu_run):
    assert "| FP32 | " in bench.step_table(gpu_run) and "| 1.00× |" in bench.step_table(gpu_run)


def test_memory_table_shows_prediction_beside_measurement(gpu_run):
    text = bench.memory_table(gpu_run)
    check = gpu_run["memory_check"]["trainer_bf16"]
    assert f"{check['predicted']['activations'] / 2**20:,.0f}" in text
    assert f"{check['measured_forward_held_bytes'] / 2**20:,.0f}" in text


def test_mlp_table_has_a_row_per_segment_length(gpu_run):
    text = bench.mlp_table(gpu_run)
    assert text.count("\n") == 2 + len(gpu_run["checkpointing"]["rows"])


def test_timeline_figure_is_an_svg(gpu_run):
    assert bench.timeline_figure(gpu_run).lstrip().startswith("<")
    assert "<svg" in bench.timeline_figure(gpu_run)


def test_gib_is_a_rows_bytes_over_2_to_the_30(gpu_run):
    held = gpu_run["gpt_checkpointing"]["rows"]["block"]["forward_held_bytes"]
    assert bench.gib(gpu_run, "gpt_checkpointing", "block") == held / 2**30


def test_memory_gaps_compare_measured_with_predicted(gpu_run):
    gaps = bench.memory_gaps(gpu_run)
    check = gpu_run["memory_check"]["trainer_bf16"]
    gap = abs(check["measured_forward_held_bytes"] - check["predicted"]["activations"]) / 2**20
    assert gaps["activation_mib"] >= gap
    assert gaps["state_mib"][0] <= gaps["state_mib"][1]
    auto = gpu_run["memory_check"]["autocast_bf16"]
    want = auto["measured_forward_held_bytes"] / auto["predicted"]["activations"]
    assert gaps["autocast"] == want


def test_selective_extra_is_per_block_difference_from_whole_blocks(gpu_run):
    rows = gpu_run["gpt_checkpointing"]["rows"]
    extra = rows["selective"]["forward_held_bytes"] - rows["block"]["forward_held_bytes"]
    want = extra / 2**20 / gpu_run["gpt"]["n_layers"]
    assert bench.selective_extra_mib(gpu_run) == pytest.approx(want, rel=1e-12)


def test_linear_outputs_are_nine_hidden_widths_per_token():
    run = {"gpt": {"hidden": 4, "seq_len": 8, "micro_batch": 2}}
    assert bench.linear_outputs_mib(run, itemsize=2) == 9 * 4 * 8 * 2 * 2 / 2**20


def test_mib_range_collapses_equal_ends(monkeypatch):
    monkeypatch.setattr(bench, "memory_gaps", lambda r: {"state_mib": (66.2, 66.4)})
    assert bench.mib_range({}) == "66"
    monkeypatch.setattr(bench, "memory_gaps", lambda r: {"state_mib": (60.0, 66.0)})
    assert bench.mib_range({}) == "60 to 66"


def test_logits_gib_is_four_bytes_per_vocabulary_score():
    run = {"gpt": {"micro_batch": 2, "seq_len": 8, "vocab": 16}}
    assert bench.logits_gib(run) == 2 * 8 * 16 * 4 / 2**30


def test_the_committed_runs_render_without_the_newer_columns(gpu_run):
    assert "MFU" not in bench.step_table(gpu_run) and "attention" not in bench.step_table(gpu_run)
    assert "compile" not in bench.checkpoint_table(gpu_run)


# ------------------------------------------------------------------ a run in the newer layout


def test_label_names_the_versions_a_figure_needs(new_run, gpu_run):
    assert bench.label(new_run, "torchao").endswith(
        "torchao 0.18.0, 2099-01-01, results/bench-cuda-test-gpu.json"
    )
    with pytest.raises(ValueError, match="recorded no version of 'torchao'"):
        bench.label(gpu_run, "torchao")
    with pytest.raises(ValueError, match="recorded no version of 'triton'"):
        bench.label(new_run, "triton")


def test_step_table_adds_sdpa_rows_and_mfu(new_run):
    text = bench.step_table(new_run)
    assert text.count("\n") == 2 + 2 * len(bench.STEP_NAMES)
    assert text.splitlines()[0] == (
        "| precision | attention | ms per step | tokens per s | MFU | speed vs FP32 | peak GiB |"
    )
    assert text.count("| 1.00× |") == 2  # FP32 against itself, for each attention
    x = new_run["training_step"]["rows"]["autocast_bf16_sdpa"]
    assert f"| `F.scaled_dot_product_attention` | {x['step_seconds'] * 1e3:.1f} |" in text
    assert f"| {x['mfu']:.0%} |" in text


def test_mfu_reads_a_rows_mfu_and_refuses_a_run_without(new_run, gpu_run):
    want = new_run["training_step"]["rows"]["tf32_sdpa"]["mfu"]
    assert bench_gpu.mfu(new_run, "training_step", "tf32_sdpa") == want
    with pytest.raises(ValueError, match="no MFU for 'training_step' row 'fp32'"):
        bench_gpu.mfu(gpu_run, "training_step", "fp32")


def test_fastest_is_the_row_with_the_shortest_step(new_run):
    names = ["autocast_bf16_sdpa", "trainer_bf16_sdpa", "fp32_sdpa"]
    rows = new_run["training_step"]["rows"]
    assert bench_gpu.fastest(new_run, "training_step", names) == min(
        names, key=lambda n: rows[n]["step_seconds"]
    )


def test_step_title_names_the_precision_and_the_attention():
    assert bench_gpu.step_title("trainer_bf16") == "BF16 weights, FP32 masters (`Trainer`)"
    assert bench_gpu.step_title("fp32_sdpa") == "FP32, `F.scaled_dot_product_attention`"
    with pytest.raises(ValueError, match="got 'int4_sdpa'"):
        bench_gpu.step_title("int4_sdpa")


def test_checkpoint_table_times_compiled_modes_against_compiled_none(new_run):
    text = bench.checkpoint_table(new_run)
    assert text.count("\n") == 2 + len(bench.MODE_NAMES) + len(bench.COMPILED_NAMES)
    assert text.count("| 1.00× |") == 2
    assert "| every block, selective, `torch.compile` |" in text


def test_fp8_builders_compare_each_recipe_with_bf16(new_run):
    assert bench_gpu.fp8_speedup(new_run, "tensorwise") == pytest.approx(0.050 / 0.040)
    assert bench_gpu.fp8_loss_gap(new_run, "rowwise") == pytest.approx(0.005)
    text = bench_gpu.fp8_table(new_run)
    assert text.count("\n") == 2 + len(bench_gpu.FP8_NAMES)
    assert "| FP8, one scale per tensor | 40.0 | 204,800 | 40% | 1.25× | 20.0 |" in text
    assert "| +0.010 |" in text and "| +0.005 |" in text
    assert "<svg" in bench_gpu.fp8_figure(new_run)


def test_fp8_run_says_why_a_run_has_none(gpu_run):
    with pytest.raises(ValueError, match=r"no FP8 training run 'bf16' \(not measured\)"):
        bench_gpu.fp8_run(gpu_run, "bf16")
    skipped = {**gpu_run, "fp8_training": {"skipped": "torchao is not importable"}}
    with pytest.raises(ValueError, match=r"\(torchao is not importable\)"):
        bench_gpu.fp8_run(skipped, "rowwise")


def test_script_table_sets_each_run_against_the_cpu_reference(new_run):
    text = bench_gpu.script_table(new_run)
    assert text.count("\n") == 2 + 3
    assert "| `train.py --compile` | 200 | 900,000 | 10% | 900 | 5.3000 | 3.0e-03 |" in text
    assert "| reference |" in text and "steps 1 to 3" in text


def test_script_run_refuses_a_skipped_or_failed_run(new_run):
    skipped = copy.deepcopy(new_run)
    skipped["train_script"]["runs"]["compiled"] = {"skipped": "no --compile option"}
    with pytest.raises(ValueError, match=r"run 'compiled' \(no --compile option\)"):
        bench_gpu.script_run(skipped, "compiled")
    assert "train.py --compile" not in bench_gpu.script_table(skipped)
    failed = copy.deepcopy(new_run)
    failed["train_script"]["runs"]["eager"]["returncode"] = 1
    with pytest.raises(ValueError, match="no train.py run 'eager'"):
        bench_gpu.script_run(failed, "eager")
