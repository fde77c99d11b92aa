"""Builders of the committed benchmark runs (gradflow_site/pages/gpu.py)."""

from __future__ import annotations

import copy

import pytest

from gradflow_ref.benchmarks import committed_runs
from gradflow_site.pages import gpu


@pytest.fixture(scope="module")
def h100():
    return gpu.run("cuda")


def test_run_is_the_first_committed_run_of_its_device():
    assert gpu.run("cuda") == committed_runs("cuda")[0]
    assert gpu.run("cpu")["device_type"] == "cpu"


def test_run_names_the_command_when_no_run_is_committed(monkeypatch):
    monkeypatch.setattr(gpu, "committed_runs", lambda device_type: [])
    with pytest.raises(ValueError, match=r"no committed benchmark on 'cuda'.*tools\.bench_gpu"):
        gpu.run("cuda")


def test_label_names_device_versions_date_and_file(h100):
    label = gpu.label(h100)
    for part in (h100["device"], h100["torch"], f"CUDA {h100['cuda']}", h100["date"]):
        assert part in label
    assert label.endswith(f"results/{h100['file']}")
    assert "thread" in gpu.label(gpu.run("cpu"))


def test_ratio_divides_one_rows_field_by_anothers(h100):
    rows = h100["training_step"]["rows"]
    want = rows["fp32"]["step_seconds"] / rows["autocast_bf16"]["step_seconds"]
    assert gpu.ratio(h100, "training_step", "fp32", "autocast_bf16") == want


def test_row_refuses_a_row_that_failed_when_measured(h100):
    broken = copy.deepcopy(h100)
    broken["training_step"]["rows"]["tf32"] = {"error": "CUDA out of memory"}
    with pytest.raises(ValueError, match="no measured 'training_step' row 'tf32'"):
        gpu.row(broken, "training_step", "tf32")
    with pytest.raises(ValueError, match="row 'int4'"):
        gpu.row(h100, "training_step", "int4")


def test_sweep_ratio_is_time_at_k_over_time_without(h100):
    rows = {r["k"]: r for r in h100["checkpointing"]["rows"]}
    assert gpu.sweep_ratio(h100, 8) == rows[8]["seconds"] / rows[64]["seconds"]
    with pytest.raises(ValueError, match="`k` must be one of"):
        gpu.sweep_ratio(h100, 3)


@pytest.mark.parametrize(
    ("builder", "names"),
    [
        (gpu.step_table, gpu.STEP_NAMES.values()),
        (gpu.checkpoint_table, gpu.MODE_NAMES.values()),
    ],
)
def test_tables_have_a_row_per_variant(h100, builder, names):
    text = builder(h100)
    assert text.count("\n") == 2 + len(list(names))  # header, rule, one line per row
    for name in names:
        assert f"| {name} |" in text


def test_step_table_puts_fp32_at_speed_one(h100):
    assert "| FP32 | " in gpu.step_table(h100) and "| 1.00× |" in gpu.step_table(h100)


def test_memory_table_shows_prediction_beside_measurement(h100):
    text = gpu.memory_table(h100)
    check = h100["memory_check"]["trainer_bf16"]
    assert f"{check['predicted']['activations'] / 2**20:,.0f}" in text
    assert f"{check['measured_forward_held_bytes'] / 2**20:,.0f}" in text


def test_mlp_table_has_a_row_per_segment_length(h100):
    text = gpu.mlp_table(h100)
    assert text.count("\n") == 2 + len(h100["checkpointing"]["rows"])


def test_timeline_figure_is_an_svg(h100):
    assert gpu.timeline_figure(h100).lstrip().startswith("<")
    assert "<svg" in gpu.timeline_figure(h100)


def test_gib_is_a_rows_bytes_over_2_to_the_30(h100):
    held = h100["gpt_checkpointing"]["rows"]["block"]["forward_held_bytes"]
    assert gpu.gib(h100, "gpt_checkpointing", "block") == held / 2**30


def test_memory_gaps_compare_measured_with_predicted(h100):
    gaps = gpu.memory_gaps(h100)
    check = h100["memory_check"]["trainer_bf16"]
    gap = abs(check["measured_forward_held_bytes"] - check["predicted"]["activations"]) / 2**20
    assert gaps["activation_mib"] >= gap
    assert gaps["state_mib"][0] <= gaps["state_mib"][1]
    auto = h100["memory_check"]["autocast_bf16"]
    want = auto["measured_forward_held_bytes"] / auto["predicted"]["activations"]
    assert gaps["autocast"] == want
