"""gradflow_site.lighthouse: the CPU slowdown calibrated to the host (the benchmark itself runs
by `make lighthouse`, not in the tests)."""

from __future__ import annotations

import pytest

from gradflow_site.lighthouse import calibrated_slowdown, main


@pytest.mark.parametrize(
    ("index", "factor"),
    [(150, 1.0), (800, 2.0), (1300, 3.0), (1533, 4.0), (1766, 5.0), (2000, 6.0)],
)
def test_calibrated_slowdown_matches_lighthouse_calculator(index, factor):
    assert calibrated_slowdown(index) == pytest.approx(factor, abs=0.01)


def test_calibrated_slowdown_never_speeds_a_slow_host_up():
    assert calibrated_slowdown(60) == 1.0


def test_calibrated_slowdown_rises_with_the_index():
    factors = [calibrated_slowdown(i) for i in range(100, 4000, 50)]
    assert factors == sorted(factors)


@pytest.mark.parametrize("index", [0, -5, float("nan")])
def test_calibrated_slowdown_rejects_a_non_positive_index(index):
    with pytest.raises(ValueError, match="benchmark_index"):
        calibrated_slowdown(index)


@pytest.mark.parametrize("value", ["0.5", "fast", "nan"])
def test_main_rejects_a_bad_cpu_slowdown(value, capsys):
    with pytest.raises(SystemExit):
        main(["site", "--cpu-slowdown", value])
    assert "--cpu-slowdown" in capsys.readouterr().err
