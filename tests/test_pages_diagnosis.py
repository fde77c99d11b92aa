"""Builders of docs/diagnosis.md (gradflow_site/pages/diagnosis.py): verdicts from seed ranges,
the tables and the widget, on a made-up record of the gallery's shape and on the real one.
"""

from __future__ import annotations

import json
import math

import pytest

from gradflow_site.pages import diagnosis as page


def fake_record(finals: dict[str, list[float | None]] | None = None) -> dict:
    """A record of the gallery's shape: 3 seeds, 4 windows; held-out losses from `finals`."""
    rows = {name: ({"lr": 1.0}, {"lr": 1.0, "guard": "skip"}) for name in page.FAILURES}
    rows["corrupt shard"] = ({"corrupt": [5, 6, 7]}, {"corrupt": [5, 6, 7], "guard": "skip"})
    finals = finals or {}
    runs = []
    for setting in ["healthy"] + [f"{n}{s}" for n in page.FAILURES for s in ("", ": remedy")]:
        for seed, val in enumerate(finals.get(setting, [2.0, 2.1, 2.2])):
            curve = [3.0 + seed, 2.5, None, 2.0]
            runs.append(
                {"setting": setting, "seed": seed, "val": val, "loss": curve, "norm": curve,
                 "logit": curve, "skipped": [0, 1, 1, 0]}
            )  # fmt: skip
    config = {"seeds": [0, 1, 2], "steps": 40, "every": 10, "healthy": {}, "rows": rows}
    return {"config": config, "runs": runs}


@pytest.mark.parametrize(
    "a, b, expected",
    [
        ([1.0, 1.1], [1.2, 1.3], "lower"),
        ([1.2, 1.3], [1.0, 1.1], "higher"),
        ([1.0, 1.2], [1.1, 1.3], "overlapping"),
        ([1.0, 1.1], [1.1, 1.3], "overlapping"),  # ranges that touch are no difference
        ([1.0, 1.1], [math.inf, 2.0], "lower"),  # a diverged run is worse than any number
    ],
)
def test_compare_reads_seed_ranges(a, b, expected):
    assert page.compare(a, b) == expected


def test_verdict_is_helped_no_difference_or_hurt():
    rec = fake_record(
        {
            "missing warmup": [2.5, 2.6, 2.7],
            "missing warmup: remedy": [2.0, 2.1, 2.2],
            "missing divisor": [2.0, 2.1, 2.2],
            "missing divisor: remedy": [2.05, 2.15, 2.25],
            "corrupt shard": [2.0, 2.1, 2.2],
            "corrupt shard: remedy": [2.3, 2.4, 2.5],
        }
    )
    assert page.verdict(rec, "missing warmup") == "helped"
    assert page.verdict(rec, "missing divisor") == "no difference"
    assert page.verdict(rec, "corrupt shard") == "hurt"


def test_verdict_counts_a_diverged_failure_as_worse():
    rec = fake_record({"learning rate too high": [None, None, 2.1]})
    assert page.finals(rec, "learning rate too high", "fail") == [math.inf, math.inf, 2.1]
    assert page.verdict(rec, "learning rate too high") == "no difference"  # 2.1 within 2.0-2.2
    rec = fake_record({"learning rate too high": [None, None, None]})
    assert page.verdict(rec, "learning rate too high") == "helped"


def test_harm_compares_with_the_healthy_run_or_the_remedy():
    # corrupt shard is measured against the healthy run; missing warmup against its remedy
    rec = fake_record(
        {
            "healthy": [1.0, 1.1, 1.2],
            "corrupt shard": [2.0, 2.1, 2.2],
            "corrupt shard: remedy": [3.0, 3.1, 3.2],
            "missing warmup": [2.0, 2.1, 2.2],
            "missing warmup: remedy": [1.9, 2.05, 2.3],
        }
    )
    assert page.harm(rec, "corrupt shard") is True
    assert page.harm(rec, "missing warmup") is False


def test_spread_gives_median_lowest_and_highest():
    assert page.spread([2.5, 2.7, 2.6]) == "2.60 (2.50–2.70)"
    assert page.spread([3.0, 1.0, 2.0], whole=True) == "2 (1–3)"
    assert page.spread([30.0, 30.0], whole=True) == "30"
    assert page.spread([2.5, math.inf, math.inf]) == "diverged (2.50–diverged)"
    assert page.spread([21000.0, 66000.0, 2.0e5]) == "6.60e+04 (2.10e+04–2.00e+05)"


def test_per_seed_leaves_out_windows_that_were_not_finite():
    rec = fake_record()
    assert page.per_seed(rec, "missing divisor", "fail", "loss") == [3.0, 4.0, 5.0]
    assert page.per_seed(rec, "missing divisor", "fix", "skipped", sum) == [2, 2, 2]


def test_call_writes_train_arguments_as_python():
    assert page.call({}) == "train(seed)"
    assert page.call({"lr": 0.01, "warmup": 0}) == "train(seed, lr=0.01, warmup=0)"
    assert page.call({"corrupt": [200, 201, 202], "guard": "skip"}) == (
        'train(seed, corrupt=range(200, 203), guard="skip")'
    )


def test_results_table_has_a_row_per_failure_with_its_verdict():
    rec = fake_record({"missing warmup": [2.5, 2.6, 2.7]})
    text = page.results_table(rec)
    assert len(text.strip().splitlines()) == 2 + len(page.FAILURES)
    assert "| missing warmup | 2.60 (2.50–2.70) | yes (against the remedy) |" in text
    assert text.count("**no difference**") == len(page.FAILURES) - 1


def test_unknown_run_is_refused():
    with pytest.raises(ValueError, match="`which` must be 'healthy', 'fail' or 'fix'"):
        page.finals(fake_record(), "missing warmup", "remedy")


def test_widget_data_carries_every_seed_and_none_for_inf():
    data = json.loads(json.dumps(page.widget_data(fake_record()), allow_nan=False))
    assert [f["name"] for f in data["failures"]] == list(page.FAILURES)
    first = data["failures"][0]
    assert len(first["fail"]["loss"]) == 3 and first["fail"]["loss"][0][2] is None
    assert first["skipped"] == [2, 2, 2] and first["verdict"] == "no difference"


def test_figure_draws_one_panel_per_failure():
    import matplotlib.pyplot as plt

    fig = page.figure(fake_record())
    assert [ax.get_title() for ax in fig.axes] == list(page.FAILURES)
    assert all(len(ax.lines) == 3 for ax in fig.axes)  # healthy, failure, remedy
    plt.close(fig)


def test_gallery_reads_the_committed_record():
    rec = page.gallery()
    assert list(rec["config"]["rows"]) == list(page.FAILURES)
    seeds = rec["config"]["seeds"]
    for name in page.FAILURES:
        for which in ("healthy", "fail", "fix"):
            assert len(page.finals(rec, name, which)) == len(seeds)


def test_unigram_loss_matches_cross_entropy_of_the_frequencies():
    import torch
    import torch.nn.functional as F

    train, held_out = torch.tensor([0, 0, 1, 2]), torch.tensor([0, 1, 1])
    p = torch.tensor([0.5, 0.25, 0.25] + [0.0] * 253, dtype=torch.float64)
    logits = p.clamp_min(1e-300).log().expand(3, 256)
    expected = F.cross_entropy(logits, held_out).item()
    assert page.unigram_loss(train, held_out) == pytest.approx(expected, rel=1e-12)


def test_unigram_loss_refuses_a_byte_the_training_text_lacks():
    import torch

    with pytest.raises(ValueError, match="never occurs in the training tokens"):
        page.unigram_loss(torch.tensor([0, 1]), torch.tensor([2]))
