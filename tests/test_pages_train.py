"""The builders of docs/train.md (gradflow_site/pages/train.py), on small made-up runs."""

from __future__ import annotations

import dataclasses

import pytest

from gradflow_site.pages import train as page


def record(step: int, loss: float) -> dict:
    return {"step": step, "loss": loss}


def result(rank: int, world: int, held: list[int], losses: list[float]) -> dict:
    log = [record(s, x) for s, x in enumerate(losses)]
    return {"log": log, "rank": rank, "world": world, "held_bytes": held, "peak_mib": 0}


@pytest.fixture(scope="module")
def cfg():
    train = page.script()
    return train.Config(n_layers=1, hidden=8, n_heads=2, seq_len=4, micro_batch=2, steps=2)


def runs_for(cfg, scale: int = 1) -> dict:
    one, halves = page.predicted(cfg, 1, 0), [page.predicted(cfg, 2, r) for r in (0, 1)]
    held = [[p.parameters * scale, p.gradients, p.optimizer_states] for p in [one, *halves]]
    return {
        "one": result(0, 1, held[0], [5.0, 4.0]),
        "two": [result(r, 2, held[1 + r], [5.0, 4.001]) for r in (0, 1)],
    }


def test_largest_gap_is_the_largest_loss_difference(cfg):
    assert page.largest_gap(runs_for(cfg)) == pytest.approx(0.001)


def test_trajectory_table_lists_every_step_with_its_difference(cfg):
    text = page.trajectory_table(runs_for(cfg))
    assert "| 1 | 4.000000 | 4.001000 | 1.0e-03 |" in text
    assert text.count("\n") == 4  # header, rule, two steps


def test_held_table_shows_measured_and_predicted_bytes(cfg):
    runs = runs_for(cfg)
    text = page.held_table(cfg, runs)
    params = runs["two"][1]["held_bytes"][0]
    assert f"| 1 of 2 | {params:,} ({params:,}) |" in text


def test_held_table_refuses_a_count_that_misses_its_prediction(cfg):
    with pytest.raises(RuntimeError, match="rank 0 of 1 holds"):
        page.held_table(cfg, runs_for(cfg, scale=2))


def test_predicted_halves_the_state_across_two_ranks(cfg):
    one, a, b = page.predicted(cfg, 1, 0), page.predicted(cfg, 2, 0), page.predicted(cfg, 2, 1)
    assert a.parameters + b.parameters == one.parameters
    assert a.optimizer_states == 2 * a.parameters


def test_one_and_two_refuses_an_odd_micro_batch(cfg):
    with pytest.raises(ValueError, match="`cfg.micro_batch` must be even"):
        page.one_and_two(dataclasses.replace(cfg, micro_batch=3))


@pytest.mark.parametrize("save_at", [0, 2])
def test_stop_and_resume_refuses_a_save_outside_the_run(cfg, save_at):
    with pytest.raises(ValueError, match="`save_at` must be from 1 to cfg.steps - 1"):
        page.stop_and_resume(cfg, save_at)


def test_flags_name_what_differs_from_the_defaults_and_parse_back(cfg):
    train = page.script()
    changed = dataclasses.replace(cfg, precision="fp16", loss_scaling=False, lr=0.03)
    argv = page.flags(changed)
    assert argv[:2] == ["--n-layers", "1"] and "--no-loss-scaling" in argv
    assert argv[argv.index("--lr") + 1] == "0.03"
    parsed = {}
    train.train, original = (lambda c, stop=None: parsed.setdefault("cfg", c)), train.train
    try:
        train.main(argv)
    finally:
        train.train = original
    assert parsed["cfg"] == changed


def test_command_launches_one_process_with_python_and_more_with_torchrun(cfg):
    assert page.command(cfg, 1).startswith("python train.py --n-layers 1 ")
    assert page.command(cfg, 2).startswith("torchrun --standalone --nproc-per-node 2 train.py ")


def test_resume_gap_is_the_largest_difference_over_the_resumed_steps():
    full = [{"step": s, "loss": 1.0 + s, "lr": 0.1} for s in range(4)]
    two = [{"step": 2, "loss": 3.0, "lr": 0.1}, {"step": 3, "loss": 4.25, "lr": 0.1}]
    assert page.resume_gap({"full": full, "two": two}, keys=("loss", "lr")) == 0.25


def test_masked_elides_speed_and_memory_only():
    out = "step 3, loss 5.2, tokens_per_s 1234.5, mfu 0.01, skipped 0\n"
    out += "rank 0/1: [1, 2, 3] B of params, grads, AdamW states; peak 335 MiB\n"
    out += "steps after the first 2: 35,149 tokens/s\n"
    assert page.masked(out) == (
        "step 3, loss 5.2, tokens_per_s …, mfu …, skipped 0\n"
        "rank 0/1: [1, 2, 3] B of params, grads, AdamW states; peak … MiB\n"
        "steps after the first 2: … tokens/s\n"
    )


def test_console_prefixes_commands_and_keeps_output():
    assert page.console(["a", "b"], "out\n") == "```console\n$ a\n$ b\nout\n```"


def test_file_end_is_the_main_guard():
    assert page.file_end() == '```python\nif __name__ == "__main__":\n    main()\n```'


def test_help_text_lists_every_flag():
    text = page.help_text()
    assert text.startswith("```console\n$ python train.py --help\nusage: train.py [-h]")
    for f in dataclasses.fields(page.script().Config):
        assert "--" + f.name.replace("_", "-") in text


def test_autocast_dtypes_name_a_dtype_per_op():
    assert set(page.autocast_dtypes()) == {"softmax", "layer_norm", "cross_entropy"}
    assert page.autocast_dtypes()["cross_entropy"] == "float32"


def test_one_process_shows_the_command_and_its_output_without_speeds(cfg):
    runs = runs_for(cfg)
    runs["commands"] = ["python train.py --steps 2", "torchrun ... train.py --steps 2"]
    runs["one"]["stdout"] = "step 2, loss 5, tokens_per_s 123.4, skipped 0\n"
    assert page.one_process(runs) == (
        "```console\n$ python train.py --steps 2\nstep 2, loss 5, tokens_per_s …, skipped 0\n```"
    )
    two = page.two_processes(runs)
    assert two.startswith("```console\n$ torchrun ... train.py --steps 2\n```\n\n| step |")


def test_resume_config_is_the_small_run_in_fp16():
    cfg = page.resume_config()
    assert (cfg.precision, cfg.n_layers, cfg.steps) == ("fp16", page.SMALL["n_layers"], 8)
    assert 1 <= page.SAVE_AT < cfg.steps
