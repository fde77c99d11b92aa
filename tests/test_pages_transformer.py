"""Builders of docs/transformer.md (gradflow_site/pages/transformer.py): the residual-stream
figure from profiles shaped as the chapter's snippet measures them, and everything the page
computes from the frozen sweeps' records, on small records made here."""

from __future__ import annotations

import math
import statistics

import pytest
import torch

from gradflow_site.pages import transformer as page


def _profiles(depths=(2, 3)):
    """Profiles whose block k (1-based) of L has norm 2 ** (L - k): block 1 largest."""
    return {
        (norm, depth_init, n): torch.tensor([2.0 ** (n - k) for k in range(1, n + 1)])
        for norm in ("pre", "post")
        for depth_init in (True, False)
        for n in depths
    }


@pytest.fixture
def figures(monkeypatch):
    """The builders' matplotlib figures, before gradflow_site.render.svg turns them into SVG."""
    import matplotlib.pyplot as plt

    monkeypatch.setattr(page, "svg", lambda fig: fig)
    yield
    plt.close("all")


def test_profile_figure_draws_four_settings_relative_to_block_l(figures):
    (ax,) = page.profile_figure(_profiles(), 3).axes
    lines = {line.get_label(): line for line in ax.lines}
    assert list(lines) == [text for text, _ in page.LABELS.values()]
    assert list(lines["pre-LN, depth init on"].get_ydata()) == [4.0, 2.0, 1.0]
    assert [line.get_linestyle() for line in lines.values()] == ["-", "--", "-", "--"]
    assert ax.get_yscale() == "log"


def test_profile_figure_renders_inline_svg_with_a_phone_variant():
    figure = page.profile_figure(_profiles(), 3)
    assert figure.startswith('<figure class="gf-figure">') and "<svg" in figure


def test_profile_figure_rejects_a_missing_setting():
    profiles = _profiles()
    del profiles["post", False, 3]
    with pytest.raises(ValueError, match=r"no entry \('post', False, 3\)"):
        page.profile_figure(profiles, 3)


def test_profile_figure_rejects_a_zero_norm():
    profiles = _profiles()
    profiles["pre", True, 2] = torch.tensor([1.0, 0.0])
    with pytest.raises(ValueError, match="positive finite norms"):
        page.profile_figure(profiles, 2)


# --- records: finals[setting][seed] lists the final loss at each of LRS (None: diverged)

LRS = [0.01, 0.1, 1.0]
INITIAL = 5.0


def _lr_record(finals: dict[str, list[list[float | None]]]) -> dict:
    settings = {"baseline": {}, "qk_norm": {"qk_norm": True}, "warmup": {"warmup": 100}}
    runs = [
        {"setting": name, "lr": lr, "seed": seed, "val": val, "initial": INITIAL}
        for name, per_seed in finals.items()
        for seed, vals in enumerate(per_seed)
        for lr, val in zip(LRS, vals)
    ]
    config = {"lrs": LRS, "seeds": [0, 1], "settings": {k: settings[k] for k in finals}}
    return {"name": "transformer_lr", "config": config, "runs": runs}


def _width_record() -> dict:
    runs = []
    for width, mup in ((32, False), (32, True), (64, False)):
        for seed in (0, 1):
            for lr in LRS:  # standard at 32: best at 1.0; μP at 32 and 64: best at 0.1
                best = 1.0 if (width, mup) == (32, False) else 0.1
                val = 2.0 + abs(math.log10(lr / best)) + 0.01 * seed
                runs.append({"width": width, "mup": mup, "lr": lr, "seed": seed, "val": val})
    for r in runs:
        r["initial"] = INITIAL
    config = {"widths": [32, 64], "base_width": 64, "lrs": LRS, "seeds": [0, 1]}
    return {"name": "transformer_width", "config": config, "runs": runs}


def test_lr_sensitivity_is_the_mean_loss_over_lrs_minus_the_best():
    rec = _lr_record({"baseline": [[2.0, 3.0, 4.0], [2.5, 2.5, 2.5]]})
    assert page.lr_sensitivity(rec, setting="baseline") == pytest.approx([1.0, 0.0])


def test_lr_sensitivity_counts_a_diverged_or_worse_run_as_the_initial_loss():
    rec = _lr_record({"baseline": [[2.0, None, 7.0]]})
    assert page.lr_sensitivity(rec, setting="baseline") == pytest.approx([(2 + 5 + 5) / 3 - 2])


def test_finals_orders_by_lr_and_seed_with_nan_for_a_diverged_run():
    rec = _lr_record({"baseline": [[2.0, None, 3.0], [2.1, 2.2, 3.1]]})
    out = page.finals(rec, setting="baseline")
    assert list(out) == LRS and out[0.01] == [2.0, 2.1] and math.isnan(out[0.1][0])


def test_lrs_that_train_needs_every_seed_below_the_ceiling():
    rec = _lr_record({"baseline": [[2.0, 2.3, None], [2.1, 2.6, 2.2]]})
    assert page.lrs_that_train(rec, 2.5, setting="baseline") == [0.01]


def test_best_lrs_gives_each_seeds_lowest_final_loss():
    rec = _lr_record({"baseline": [[2.0, 1.9, None], [2.1, 2.2, 2.3]]})
    assert page.best_lrs(rec, setting="baseline") == [0.1, 0.01]


def test_runs_serves_mup_at_the_base_width_with_the_standard_runs():
    rec = _width_record()
    assert page.runs(rec, width=64, mup=True) == page.runs(rec, width=64, mup=False)
    assert page.best_lrs(rec, width=32, mup=False) == [1.0, 1.0]
    assert page.best_lrs(rec, width=32, mup=True) == [0.1, 0.1]


def test_runs_names_what_matched_nothing():
    with pytest.raises(ValueError, match=r"no run of transformer_lr has \{'setting': 'z'\}"):
        page.runs(_lr_record({"baseline": [[2.0, 2.0, 2.0]]}), setting="z")


def test_label_names_each_switch_and_refuses_an_unknown_one():
    assert page.label({}) == "baseline"
    assert page.label({"z_loss": 1e-4}) == "z-loss 0.0001"
    assert page.label({"warmup": 100}) == "warmup 100 steps"
    assert page.label({"depth_init": False}) == "no depth-scaled init"
    assert page.label({"norm": "post"}) == "post-LN"
    with pytest.raises(ValueError, match=r"no name for the switches \['dropout'\]"):
        page.label({"dropout": 0.1})


def test_lr_table_has_a_row_per_setting_with_seed_ranges():
    rec = _lr_record(
        {
            "baseline": [[2.0, 3.0, 4.0], [2.2, 3.2, None]],
            "qk_norm": [[2.0, 2.1, 2.2], [2.0, 2.0, 2.3]],
        }
    )
    rows = page.lr_table(rec, ceiling=2.25).splitlines()[2:]
    assert rows[0].startswith("| baseline | 1.13 (1-1.27) | 2.100 (2.000-2.200) | 0.01 only |")
    assert rows[1].startswith("| QK-norm | 0.1 (0.1-0.1) | 2.000 (2.000-2.000) | 0.01 to 0.1 |")


def _titles(fig) -> list[str]:
    return [ax.get_title() for ax in fig.axes]


def test_lr_figure_draws_the_baseline_beside_each_other_setting(figures):
    rec = _lr_record(
        {"baseline": [[2.0, 3.0, None]], "qk_norm": [[2.0, 2.1, 2.2]], "warmup": [[2, 2, 3]]}
    )
    fig = page.lr_figure(rec)
    assert _titles(fig) == ["QK-norm", "warmup 100 steps"]
    qk = fig.axes[0]
    assert list(qk.lines[0].get_ydata()) == [2.0, 3.0, INITIAL]  # the baseline, diverged at 5
    assert list(qk.lines[1].get_ydata()) == [2.0, 2.1, 2.2]
    assert len(qk.collections) == 2  # a band per line
    texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert texts == ["baseline", "the panel's setting"]


def test_lr_figure_draws_the_floor_when_given(figures):
    rec = _lr_record({"baseline": [[2, 3, 4]], "qk_norm": [[2, 2, 3]]})
    fig = page.lr_figure(rec, 4.5)
    floors = [
        line for line in fig.axes[0].lines if line.get_linestyle() == ":" and len(line.get_ydata())
    ]
    assert [list(line.get_ydata()) for line in floors] == [[4.5, 4.5]]
    assert "byte frequencies" in [t.get_text() for t in fig.legends[0].get_texts()]


def test_width_figure_draws_a_line_and_a_ring_per_width_in_each_parametrisation(figures):
    fig = page.width_figure(_width_record())
    assert _titles(fig) == ["standard: init 0.02, one LR", "μP"]
    standard, mup = fig.axes
    rings = [line for line in standard.lines if line.get_marker() == "o"]
    assert [list(r.get_xdata()) for r in rings] == [[1.0], [0.1]]  # each width's best median
    assert [
        line.get_label() for line in standard.lines if not line.get_label().startswith("_")
    ] == [
        "width 32",
        "width 64",
    ]
    assert [list(r.get_xdata()) for r in mup.lines if r.get_marker() == "o"] == [[0.1], [0.1]]


def test_width_table_gives_each_seeds_best_lr():
    rows = page.width_table(_width_record()).splitlines()[2:]
    assert rows[0].startswith("| 32 | 1, 1 | 2.005 (2.000-2.010) | 0.1, 0.1 |")
    assert rows[1].startswith("| 64 | 0.1, 0.1 |")


def test_unigram_loss_is_the_cross_entropy_of_byte_frequencies():
    train = torch.tensor([0, 0, 0, 1])
    windows = torch.tensor([[9, 0, 1]])
    expected = -(math.log(0.75) + math.log(0.25)) / 2
    assert page.unigram_loss(train, windows) == pytest.approx(expected)
    with pytest.raises(ValueError, match="never occurs in `train_data`"):
        page.unigram_loss(train, torch.tensor([[0, 2]]))


def test_about_reads_device_date_and_torch_from_the_record():
    rec = {
        "device": "cpu: X, 1 thread",
        "date": "2026-12-01T22:00:00+00:00",
        "versions": {"python": "3.11.7", "torch": "2.13.0"},
        "wall_seconds": 90.0,
        "command": "python -m tools.freeze x",
    }
    assert page.about(rec) == {
        "device": "X, 1 thread",
        "date": "2026-12-01",
        "torch": "2.13.0",
        "minutes": 1.5,
        "command": "python -m tools.freeze x",
    }


def test_at_reads_a_fields_last_value_per_seed():
    rec = _lr_record({"baseline": [[2.0, 3.0, None], [2.1, 3.1, 4.0]]})
    for r in rec["runs"]:
        r["max_logit"] = [1.0, 10.0 * r["seed"] + r["lr"]]
    assert page.at(rec, "max_logit", 0.1, setting="baseline") == [0.1, 10.1]
    assert page.at(rec, "val", 1.0, setting="baseline")[1] == 4.0
    assert math.isnan(page.at(rec, "val", 1.0, setting="baseline")[0])


def test_ceiling_is_the_baselines_best_median_plus_the_margin():
    rec = _lr_record({"baseline": [[2.0, 3.0, 4.0], [2.2, 2.9, 4.0], [2.4, 2.8, 4.0]]})
    assert page.ceiling(rec) == pytest.approx(2.2 + page.MARGIN)


def test_at_takes_several_lrs_and_peak_the_largest_last_value():
    rec = _lr_record({"baseline": [[2.0, 3.0, 4.0], [2.5, 3.5, None]]})
    assert page.at(rec, "val", [0.01, 1.0], setting="baseline")[:3] == [2.0, 2.5, 4.0]
    for r in rec["runs"]:
        r["log_z"] = r["lr"] * 10 + r["seed"]
    assert page.peak(rec, "log_z", setting="baseline") == 11.0


def test_best_losses_and_median_best_lr_skip_diverged_runs():
    rec = _lr_record({"baseline": [[2.0, 1.5, None], [2.1, 1.7, 1.0], [2.2, 1.6, None]]})
    assert page.best_losses(rec, setting="baseline") == [1.5, 1.0, 1.6]
    assert page.median_best_lr(rec, setting="baseline") == 0.1  # 1.0's median is NaN


def test_above_best_and_collapsed_from():
    rec = _lr_record({"baseline": [[2.0, 2.5, 3.3], [2.2, 2.7, 3.305]]})
    assert page.above_best(rec, [0.1, 1.0], setting="baseline") == pytest.approx(0.5)
    assert page.collapsed_from(rec, 3.3, setting="baseline") == 1.0
    assert page.collapsed_from(rec, 9.0, setting="baseline") is None


def test_lr_range_reads_a_list_of_learning_rates():
    assert page.lr_range([0.001, 0.003, 0.01]) == "0.001 to 0.01"
    assert page.lr_range([0.003]) == "0.003 only"
    assert page.lr_range([]) == "none"


# --- what docs/transformer.md says in words about the committed records holds in them


@pytest.fixture(scope="module")
def sweeps():
    from tools.experiments import snippet

    ns = snippet("snippets/transformer.py", "imports", "lm_loss", "groups")
    unigram = page.unigram_loss(ns["train_data"], ns["val_windows"])
    return page.record("transformer_lr"), page.record("transformer_width"), unigram


def _overlap(a, b):
    return min(a) <= max(b) and min(b) <= max(a)


def test_chapter_claims_about_the_remedies_hold(sweeps):
    lr, _, unigram = sweeps
    ceiling = page.ceiling(lr)
    train = {s: page.lrs_that_train(lr, ceiling, setting=s) for s in lr["config"]["settings"]}
    sens = {s: page.lr_sensitivity(lr, setting=s) for s in lr["config"]["settings"]}
    best = {s: page.best_losses(lr, setting=s) for s in lr["config"]["settings"]}
    # a longer warmup widened the range that trains and lowered the best loss, not the sensitivity
    assert max(train["warmup"]) > max(train["baseline"]) and max(best["warmup"]) < min(
        best["baseline"]
    )
    assert _overlap(sens["warmup"], sens["baseline"])
    # QK-norm lowered the sensitivity most, seed ranges apart, without widening the range
    assert max(sens["qk_norm"]) < min(sens["baseline"]) and train["qk_norm"] == train["baseline"]
    assert min(sens["qk_norm"]) == min(min(v) for v in sens.values())
    assert all(abs(v - unigram) < 0.01 for v in page.at(lr, "val", 1.0, setting="qk_norm"))
    # z-loss and depth-scaled init: sensitivity and every learning rate's losses overlap
    for s in ("z_loss", "no_depth_init"):
        assert _overlap(sens[s], sens["baseline"])
        for rate, losses in page.finals(lr, setting=s).items():
            assert _overlap(losses, page.finals(lr, setting="baseline")[rate]), (s, rate)
    # post-LN worse wherever either learned from the context; no learning rate that trains
    base, post = page.finals(lr, setting="baseline"), page.finals(lr, setting="post_ln")
    for rate in base:
        medians = statistics.median(base[rate]), statistics.median(post[rate])
        if min(medians) < unigram - 0.05:
            assert medians[1] > medians[0], rate
    assert train["post_ln"] == []


def test_chapter_claims_about_width_hold(sweeps):
    _, width, _ = sweeps
    sp = {w: page.median_best_lr(width, width=w, mup=False) for w in width["config"]["widths"]}
    mup = {w: page.median_best_lr(width, width=w, mup=True) for w in width["config"]["widths"]}
    assert sp[128] < sp[32] and len(set(mup.values())) == 1
    assert page.best_lrs(width, width=128, mup=False) == [sp[128]] * 3
    assert sp[32] == mup[32]  # the quiz: the old learning rate is μP's, unstable at width 128
    best = {(w, m): page.best_losses(width, width=w, mup=m) for w in (32, 64, 128) for m in (0, 1)}
    assert min(best[32, 0]) > max(best[64, 0]) and min(best[64, 0]) > max(best[128, 0])
    assert min(best[128, 1]) > max(best[128, 0]) and _overlap(best[128, 1], best[64, 1])
    # at the two optima of width 128 the hidden matrices trained at the same rate
    assert mup[128] * 64 / 128 == sp[128]


def test_spread_takes_the_true_median_and_writes_large_values_whole():
    assert page.spread([1.0, 2.0, 3.0, 10.0]) == "2.5 (1-10)"
    assert page.spread([1129.1, 3806.6, 89834.0]) == "3807 (1129-89834)"
    assert page.spread([2.4, 2.5], ".3f") == "2.450 (2.400-2.500)"
