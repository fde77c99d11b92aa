"""Builders of the committed benchmark runs (gradflow_site/pages/bench.py)."""

from __future__ import annotations

import copy

import pytest

from gradflow_ref.benchmarks import committed_runs
from gradflow_site.pages import bench


@pytest.fixture(scope="module")
def gpu_run():
    return bench.run("cuda")


def test_run_is_the_first_committed_run_of_its_device():
    assert bench.run("cuda") == committed_runs("cuda")[0]
    assert bench.run("cpu")["device_type"] == "cpu"


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
