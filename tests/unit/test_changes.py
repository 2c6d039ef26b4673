"""analysis.changes (Apache Otava) on synthetic series with known shifts."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.analysis.changes import change_points


def test_two_known_shifts_are_found_where_they_are() -> None:
    rng = np.random.default_rng(0)
    series = np.concatenate([rng.normal(100, 1, 30), rng.normal(110, 1, 30), rng.normal(95, 1, 30)])
    found = change_points(list(series))
    assert [c.index for c in found] == [30, 60]
    assert found[0].before == pytest.approx(100, abs=1) and found[0].after == pytest.approx(110, abs=1)
    assert found[0].change == pytest.approx(0.10, abs=0.015) and found[1].change == pytest.approx(-0.136, abs=0.015)
    assert all(c.p_value <= 0.001 for c in found)


def test_flat_series_has_none() -> None:
    rng = np.random.default_rng(0)
    assert change_points(list(rng.normal(100, 1, 90))) == []
    assert change_points([5.0] * 60) == []
    # the false-alarm rate over many flat series stays small (measured: 3 of 200 with the 2% minimum)
    rng = np.random.default_rng(1)
    false = sum(bool(change_points(list(rng.normal(100, 1, 90)))) for _ in range(200))
    assert false <= 4


def test_a_five_percent_step_in_one_percent_noise_is_found_and_small_steps_are_not() -> None:
    rng = np.random.default_rng(2)
    series = list(np.concatenate([rng.normal(1.0, 0.01, 20), rng.normal(1.05, 0.01, 20)]))
    assert [c.index for c in change_points(series)] == [20]
    small = list(np.concatenate([rng.normal(1.0, 0.001, 20), rng.normal(1.01, 0.001, 20)]))  # clear but 1%
    assert change_points(small) == []
    assert [c.index for c in change_points(small, min_magnitude=0.0)] == [20]


def test_short_or_bad_series() -> None:
    assert change_points([]) == [] and change_points([1.0, 2.0, 3.0]) == []
    with pytest.raises(ValueError, match="finite"):
        change_points([1.0, float("nan"), 1.0, 1.0])
    with pytest.raises(ValueError, match="window_len"):
        change_points([1.0] * 10, window_len=1)
