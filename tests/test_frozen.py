"""Frozen experiments (tools/freeze.py, gradflow_site/records.py, /work/notes/FROZEN.md).

Every experiment has a record; every record is fresh (its files unchanged) and complete; the
first steps of each record's first run, run again, give the values the record holds; a record
whose code or data changed is refused with a message that names the file and the command.

Tolerance of the replay: CPU float32 arithmetic repeats bit for bit on one machine with one
torch version and one thread, so where the record's device and versions are this process's the
values must be equal. Elsewhere another CPU's kernels may sum in another order, which moves a
float32 loss by about 1e-7 relative per operation; RTOL allows that over five steps, while a
changed run moves them by more (test_replay_detects_a_changed_run: twice the learning rate or
another seed by over 1e-3, QK-norm switched on by 3e-4).
"""

from __future__ import annotations

import copy
import importlib
import json
import os
import platform
import shutil
import subprocess
import sys

import pytest
import torch

from gradflow_site import records
from tests._site import ROOT
from tools import freeze

NAMES = sorted(p.stem for p in (ROOT / freeze.RECORDS).glob("*.json"))
FIELDS = ("name", "command", "fingerprint", "files", "versions", "device", "date")
FIELDS += ("wall_seconds", "config", "replay")
STEPS = 5
RTOL = 1e-4


def test_every_experiment_has_a_record_and_every_record_an_experiment():
    assert NAMES == freeze.discover(), (
        "run `python -m tools.freeze NAME` for an experiment without a record, "
        "and delete a record whose experiment is gone"
    )


@pytest.mark.parametrize("name", NAMES)
def test_record_is_fresh_and_complete(name):
    record = records.load(name)
    missing = [f for f in FIELDS if f not in record]
    assert not missing, f"{name}: the record lacks {missing}"
    assert record["name"] == name and record["command"] == f"python -m tools.freeze {name}"
    assert f"tools/experiments/{name}.py" in record["files"]
    assert {"python", "torch"} <= set(record["versions"])


@pytest.mark.parametrize("name", NAMES)
def test_replay_matches_the_record(name):
    record = records.load(name)
    module = importlib.import_module(f"tools.experiments.{name}")
    expected = record["replay"][:STEPS]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as tools.freeze runs it
    try:
        got = module.replay(record, len(expected))
        here = freeze.device()
    finally:
        torch.set_num_threads(threads)
    same_machine = record["device"] == here and record["versions"] == {
        "python": platform.python_version(),
        "torch": torch.__version__,
    }
    tolerance = dict(rtol=0.0, atol=0.0) if same_machine else dict(rtol=RTOL, atol=0.0)
    torch.testing.assert_close(
        torch.tensor(got, dtype=torch.float64),
        torch.tensor(expected, dtype=torch.float64),
        **tolerance,
        msg=lambda m: f"{name}: the replayed first steps differ from the record: {m}",
    )


@pytest.mark.parametrize("change", [{"lr": 2e-3}, {"seed": 1}, {"setting": "qk_norm"}])
def test_replay_detects_a_changed_run(change):
    from tools.experiments import transformer_lr

    record = records.load("transformer_lr")
    changed = copy.deepcopy(record)
    changed["runs"][0].update(change)
    got = transformer_lr.replay(changed, STEPS)
    moved = max(abs(a - b) / abs(b) for a, b in zip(got, record["replay"]))
    assert moved > 2 * RTOL, f"{change} moved the first steps by only {moved:.1e}"


# --- the machinery on a toy repository: tools/ copied beside an experiment that reads data


TOY = """
from pathlib import Path

from tools.experiments import _helper


def run():
    text = (Path(__file__).parents[2] / "data.txt").read_text()
    return {"config": {"scale": _helper.SCALE}, "length": len(text) * _helper.SCALE,
            "replay": [VALUE]}


def replay(record, steps):
    return [VALUE][:steps]
"""


def _toy(tmp_path, value="1.5"):
    for rel in ("tools/__init__.py", "tools/freeze.py", "tools/experiments/__init__.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    (tmp_path / "tools/experiments/_helper.py").write_text("SCALE = 2\n", encoding="utf-8")
    (tmp_path / "tools/experiments/toy.py").write_text(TOY.replace("VALUE", value), "utf-8")
    (tmp_path / "data.txt").write_text("abc", encoding="utf-8")
    return tmp_path


def _freeze(root, *names):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-m", "tools.freeze", *names],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    root = _toy(tmp_path_factory.mktemp("toy"))
    result = _freeze(root)
    assert result.returncode == 0, result.stderr
    return root


def test_freeze_records_every_file_the_experiment_imports_or_reads(toy):
    record = json.loads((toy / "results/frozen/toy.json").read_text(encoding="utf-8"))
    assert sorted(record["files"]) == [
        "data.txt",
        "tools/experiments/__init__.py",
        "tools/experiments/_helper.py",
        "tools/experiments/toy.py",
    ]
    assert record["fingerprint"] == freeze.fingerprint(record["files"])
    assert record["config"] == {"scale": 2} and record["length"] == 6
    assert record["command"] == "python -m tools.freeze toy"
    assert record["device"].startswith("cpu: ") and record["device"].endswith(", 1 thread")
    assert record["date"].endswith("+00:00") and record["wall_seconds"] >= 0


def test_load_returns_a_fresh_record(toy):
    assert records.load("toy", root=toy)["length"] == 6


@pytest.mark.parametrize("changed", ["data.txt", "tools/experiments/_helper.py"])
def test_load_refuses_a_record_whose_file_changed(tmp_path, toy, changed):
    root = shutil.copytree(toy, tmp_path / "repo")
    with open(root / changed, "a", encoding="utf-8") as f:
        f.write("\n")
    with pytest.raises(RuntimeError) as e:
        records.load("toy", root=root)
    assert str(e.value) == (
        f"results/frozen/toy.json is stale: {changed} changed since it ran; "
        "rerun `python -m tools.freeze toy` and commit the record."
    )


def test_load_refuses_a_record_whose_file_is_gone(tmp_path, toy):
    root = shutil.copytree(toy, tmp_path / "repo")
    (root / "data.txt").unlink()
    with pytest.raises(RuntimeError, match=r"stale: data\.txt changed since it ran; rerun `py"):
        records.load("toy", root=root)


def test_load_refuses_a_record_whose_fingerprint_was_edited(tmp_path, toy):
    root = shutil.copytree(toy, tmp_path / "repo")
    path = root / "results/frozen/toy.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    record["files"]["data.txt"] = "0" * 64
    path.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(RuntimeError, match="fingerprint does not match its files"):
        records.load("toy", root=root)


def test_load_names_the_command_for_a_missing_record(toy):
    with pytest.raises(FileNotFoundError, match="run `python -m tools.freeze nothing`"):
        records.load("nothing", root=toy)


def test_freeze_rejects_an_unknown_experiment(toy):
    result = _freeze(toy, "nothing")
    assert result.returncode == 2
    assert "no experiment ['nothing']; the experiments are ['toy']" in result.stderr


def test_freeze_refuses_data_that_json_cannot_hold_and_keeps_the_old_record(tmp_path, toy):
    root = shutil.copytree(toy, tmp_path / "repo")
    before = (root / "results/frozen/toy.json").read_text(encoding="utf-8")
    (root / "tools/experiments/toy.py").write_text(TOY.replace("VALUE", "float('nan')"), "utf-8")
    result = _freeze(root, "toy")
    assert result.returncode == 1
    assert "must be JSON with finite numbers (store a diverged value as None)" in result.stderr
    assert (root / "results/frozen/toy.json").read_text(encoding="utf-8") == before
    assert [p.name for p in (root / "results/frozen").iterdir()] == ["toy.json"]
