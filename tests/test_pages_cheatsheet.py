"""Builders of docs/cheatsheet.md (gradflow_site/pages/cheatsheet.py): counted costs, committed
speeds and their labels."""

from __future__ import annotations

import json
import runpy

import pytest

from gradflow_site.pages import cheatsheet as sheet


@pytest.fixture(scope="module")
def cost():
    return sheet.costs()


def bench(tmp_path, name="bench-cpu-x.json", **overrides):
    run = {
        "device": "Some CPU @ 1.00GHz",
        "device_type": "cpu",
        "torch": "2.13.0+cpu",
        "cpu_threads": 2,
        "date": "2026-01-02",
        "precision": {"float32": 1.0, "bfloat16": 4.0},
    }
    run.update(overrides)
    (tmp_path / name).write_text(json.dumps(run), encoding="utf-8")
    return tmp_path


def test_costs_match_the_formats_byte_counts(cost):
    assert cost.activation_ratio == 0.5  # BF16 stores 2 bytes where FP32 stores 4
    assert cost.weight_ratio == 1.5  # 2-byte BF16 weights + 4-byte FP32 master over 4 bytes
    assert cost.accum_memory == 4.0  # one micro-batch of 16 against a batch of 64


def test_costs_checkpointing_saves_more_memory_at_64_layers_than_at_16(cost):
    assert cost.ckpt_memory[64] > cost.ckpt_memory[16] > 1
    assert cost.ckpt_compute == pytest.approx(cost.ckpt64.recomputed / (3 * 64), rel=1e-12)
    assert 0 < cost.ckpt_compute < 1 / 3


def test_costs_equal_what_the_snippet_prints(cost, capsys):
    shown = runpy.run_path(str(sheet.SNIPPET))
    capsys.readouterr()
    for name in ("ckpt_memory", "ckpt_compute", "activation_ratio", "weight_ratio"):
        assert getattr(cost, name) == shown[name], name


def test_costs_rejects_a_snippet_without_its_sections(tmp_path):
    snippet = tmp_path / "cheatsheet.py"
    snippet.write_text("# --8<-- [start:setup]\nx = 1\n# --8<-- [end:setup]\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no section 'checkpoint_costs'"):
        sheet.costs(snippet)


def test_committed_speed_is_fp32_time_over_bf16_time(tmp_path):
    (record,) = sheet.committed_speed(bench(tmp_path))
    assert record["ratio"] == 0.25
    assert record["file"] == "bench-cpu-x.json" and record["threads"] == 2


def test_committed_speed_names_the_file_missing_a_field(tmp_path):
    with pytest.raises(ValueError, match=r"bench-cpu-x\.json has no field 'date'"):
        sheet.committed_speed(_without_date(tmp_path))


def _without_date(tmp_path):
    path = bench(tmp_path)
    run = json.loads((path / "bench-cpu-x.json").read_text(encoding="utf-8"))
    del run["date"]
    (path / "bench-cpu-x.json").write_text(json.dumps(run), encoding="utf-8")
    return path


def test_committed_speed_reads_the_repository_results():
    records = sheet.committed_speed()
    assert records, "results/ holds no bench-*.json: the cheat sheet quotes one"
    assert all(r["ratio"] > 0 for r in records)


def test_speed_label_says_where_and_when_it_was_measured(tmp_path):
    label = sheet.speed_label(sheet.committed_speed(bench(tmp_path)), "cpu")
    assert label == (
        "0.25x FP32's speed on Some CPU @ 1.00GHz (2 threads, torch 2.13.0+cpu, 2026-01-02; "
        "results/bench-cpu-x.json)"
    )
    assert sheet.speed_label([], "cuda") == "no committed cuda result"


def test_ratio_rejects_a_device_type_without_a_result(tmp_path):
    records = sheet.committed_speed(bench(tmp_path))
    assert sheet.ratio(records, "cpu") == 0.25
    with pytest.raises(ValueError, match="no committed result for device_type 'cuda'"):
        sheet.ratio(records, "cuda")
