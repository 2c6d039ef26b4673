"""analysis.changes (Apache Otava) on synthetic series with known shifts."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.analysis.changes import Change, change_points


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


# --- each argument and figure at its edge (issue 19, mutation testing) ---


def test_four_points_are_enough_and_the_figures_are_the_segment_means() -> None:
    """MIN_POINTS = 4: [1, 1, 2, 2] splits at index 2; before/after are the segments' means, change = 2/1 - 1."""
    assert change_points([1.0, 1.0, 2.0, 2.0]) == [Change(index=2, before=1.0, after=2.0, change=1.0, p_value=0.0)]
    (c,) = change_points([2.0, 2.0, 1.0, 1.0])
    assert (c.index, c.before, c.after, c.change) == (2, 2.0, 1.0, -0.5)  # 1/2 - 1


def test_max_pvalue_is_handed_to_otava() -> None:
    # [1.0, 1.1 | 2.0, 2.1]: the t-test between the halves gives a p-value between 0.001 and 0.01, so the default
    # (0.001) reports nothing and 0.01 reports the change; means 1.05 and 2.05, change 2.05 / 1.05 - 1 = 20/21
    assert change_points([1.0, 1.1, 2.0, 2.1]) == []
    (c,) = change_points([1.0, 1.1, 2.0, 2.1], max_pvalue=0.01)
    assert (c.index, c.before, c.after) == (2, pytest.approx(1.05), pytest.approx(2.05))
    assert c.change == pytest.approx(20 / 21) and 0.001 < c.p_value <= 0.01


def test_a_mean_of_zero_before_gives_no_relative_change() -> None:
    assert change_points([0.0, 0.0, 1.0, 1.0]) == [Change(index=2, before=0.0, after=1.0, change=None, p_value=0.0)]


def test_window_len_is_handed_to_otava() -> None:
    """The module docstring's limit: 1.0 -> 1.1 -> 0.95 with 8 points per level (0.5% noise, seed 1): Otava's
    window of 50 reports neither change, a window of 16 both."""
    rng = np.random.default_rng(1)
    series = list(np.concatenate([rng.normal(1.0, 0.005, 8), rng.normal(1.1, 0.005, 8), rng.normal(0.95, 0.005, 8)]))
    assert change_points(series) == []
    assert [c.index for c in change_points(series, window_len=16)] == [8, 16]


def test_argument_errors_name_the_value() -> None:
    assert change_points([1.0] * 5 + [2.0] * 5, window_len=2) == []  # the smallest window: accepted (none found)
    for bad in (1, 0, -3):
        with pytest.raises(ValueError, match=rf"^window_len must be >= 2, got {bad}$"):
            change_points([1.0] * 10, window_len=bad)
    for v in (float("inf"), float("-inf"), float("nan")):
        with pytest.raises(ValueError, match=r"^a change-point series must hold finite numbers only$"):
            change_points([1.0, 1.0, v, 1.0, 1.0])
