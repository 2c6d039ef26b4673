"""analysis.stats at its edges: exact figures worked by hand (arithmetic in the comments) and SciPy as the reference
for the rank test and the bootstrap — written against the survivors of a mutation run (docs/testing.md)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from orchestrator.analysis import stats
from orchestrator.analysis.casestats import CaseStats
from orchestrator.analysis.stats import call_case, compare_samples
from orchestrator.cli.render import ci_text

# --- the rank test's p-value: SciPy's mannwhitneyu is the reference ---------------------------------------------


def test_p_value_at_eight_against_eight_is_scipys_exact_one() -> None:
    """8 vs 8 is still SciPy's exact test ('auto' goes asymptotic only when both sides exceed 8)."""
    base = [1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7]
    head = [2.0, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7]
    st = stats.compare_samples(base, head)
    # every head sample above every base sample: the two most extreme of C(16, 8) = 12870 orderings
    assert st.p_value == pytest.approx(2 / 12870, rel=1e-12)
    assert st.p_value == pytest.approx(sps.mannwhitneyu(head, base, alternative="two-sided").pvalue, rel=1e-12)
    assert st.p_value != pytest.approx(
        sps.mannwhitneyu(head, base, alternative="two-sided", method="asymptotic").pvalue, rel=1e-3
    )


def test_p_value_of_each_case_is_scipys_for_that_case_alone_at_eight_against_eight() -> None:
    """Two 8 vs 8 cases in one group: ties in one must not turn the other's exact test asymptotic (SciPy's 'auto'
    judges ties over the whole array it is given)."""
    untied = ([1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7], [2.0, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7])
    tied = ([1.0] * 4 + [1.5] * 4, [1.5] * 4 + [2.0] * 4)
    out = stats.compare_many([(*untied, 0.0, "within-run"), (*tied, 0.0, "within-run")])
    assert out[0].p_value == pytest.approx(2 / 12870, rel=1e-12)  # exact, as for the case alone
    for (base, head), st in zip((untied, tied), out, strict=True):
        assert st.p_value == pytest.approx(sps.mannwhitneyu(head, base, alternative="two-sided").pvalue, rel=1e-12)


def test_p_value_at_nine_against_nine_is_scipys_asymptotic_one() -> None:
    rng = np.random.default_rng(21)
    base, head = list(rng.normal(1.0, 0.05, 9)), list(rng.normal(1.04, 0.05, 9))
    st = stats.compare_samples(base, head)
    assert st.p_value == pytest.approx(sps.mannwhitneyu(head, base, alternative="two-sided").pvalue, rel=1e-12)


# --- the bootstrap interval: SciPy's bootstrap with the documented settings is the reference ---------------------


def _scipy_interval(
    base: list[float], head: list[float], *, confidence: float, n_resamples: int, seed: int
) -> tuple[float, float]:
    def ratio(b: Any, h: Any, axis: int = -1) -> Any:
        return np.median(h, axis=axis) / np.median(b, axis=axis)

    res = sps.bootstrap(
        (np.asarray(base)[None, :], np.asarray(head)[None, :]), ratio, vectorized=True, paired=False, axis=-1,
        n_resamples=n_resamples, batch=stats.BOOTSTRAP_BATCH, confidence_level=confidence, method="percentile",
        rng=np.random.default_rng(seed),
    )  # fmt: skip
    return float(res.confidence_interval.low[0]), float(res.confidence_interval.high[0])


@pytest.mark.parametrize(("confidence", "n_resamples", "seed"), [(0.95, stats.N_RESAMPLES, 0), (0.8, 300, 5)])
def test_interval_is_scipys_percentile_bootstrap_of_the_ratio_of_medians(
    confidence: float, n_resamples: int, seed: int
) -> None:
    rng = np.random.default_rng(22)
    base, head = list(rng.normal(1.0, 0.03, 12)), list(rng.normal(1.05, 0.03, 10))
    st = stats.compare_samples(base, head, confidence=confidence, n_resamples=n_resamples, seed=seed)
    want = _scipy_interval(base, head, confidence=confidence, n_resamples=n_resamples, seed=seed)
    assert (st.ci_low, st.ci_high) == pytest.approx(want, rel=1e-12)
    assert st.ratio == pytest.approx(float(np.median(head) / np.median(base)), rel=1e-12)


def test_a_narrower_confidence_gives_a_narrower_interval() -> None:
    rng = np.random.default_rng(23)
    base, head = list(rng.normal(1.0, 0.03, 12)), list(rng.normal(1.05, 0.03, 12))
    wide, narrow = stats.compare_samples(base, head), stats.compare_samples(base, head, confidence=0.5)
    assert wide.ci_low is not None and wide.ci_high is not None
    assert narrow.ci_low is not None and narrow.ci_high is not None
    assert wide.ci_low < narrow.ci_low < narrow.ci_high < wide.ci_high


def test_confidence_must_be_strictly_inside_zero_and_one() -> None:
    for bad in (0.0, 1.0, -0.5, 1.5):
        with pytest.raises(ValueError, match=f"confidence must be in \\(0, 1\\), got {bad}"):
            stats.compare_samples([1.0] * 4, [1.0] * 4, confidence=bad)


# --- which cases are tested, and what an untested one carries --------------------------------------------------


def test_an_untested_case_keeps_its_band_and_source_and_has_no_ratio() -> None:
    # 2 base samples against 3: one side below MIN_SAMPLES (3) is enough
    st = stats.compare_samples([1.0, 1.1], [2.0, 2.1, 2.2], band=0.07, band_source="calibration")
    assert (st.ratio, st.ci_low, st.ci_high, st.p_value, st.call) == (None, None, None, None, "n/a")
    assert (st.band, st.band_source, st.n_base, st.n_head) == (0.07, "calibration", 2, 3)
    st = stats.compare_samples([2.0, 2.1, 2.2], [1.0, 1.1], band=0.07, band_source="calibration")
    assert (st.ratio, st.call, st.band, st.band_source) == (None, "n/a", 0.07, "calibration")


def test_a_head_median_of_zero_is_not_tested() -> None:
    st = stats.compare_samples([1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 5.0])  # head median 0
    assert (st.ratio, st.p_value, st.call) == (None, None, "n/a")


def test_an_untested_case_before_a_tested_one_does_not_end_the_list() -> None:
    cases: list[stats.CaseInput] = [
        ([1.0], [1.0], 0.0, "within-run"),
        ([1.0, 1.1, 1.2, 1.3], [2.0, 2.1, 2.2, 2.3], 0.0, "within-run"),
        ([0.0, 0.0, 0.0], [1.0, 1.0, 1.0], 0.0, "within-run"),
    ]
    out = stats.compare_many(cases)
    assert [c.call for c in out] == ["n/a", "slower", "n/a"]
    # medians 2.15 / 1.15; all head above all base, 4 vs 4: p = 2 / C(8, 4) = 2 / 70
    assert out[1].ratio == pytest.approx(2.15 / 1.15) and out[1].p_value == pytest.approx(2 / 70)


def test_a_tested_case_keeps_its_band_source_and_defaults_to_within_run() -> None:
    base, head = [1.0, 1.1, 1.2, 1.3], [2.0, 2.1, 2.2, 2.3]
    assert stats.compare_samples(base, head, band=0.3, band_source="calibration").band_source == "calibration"
    assert stats.compare_samples(base, head).band_source == "within-run"


def test_only_finite_real_numbers_are_samples() -> None:
    # a text, None, a bool or NaN is no measurement: 1.0 and 2.0 are left of base, below MIN_SAMPLES
    st = stats.compare_samples([1.0, "3.0", None, True, float("nan"), 2.0], [1.0] * 4)  # type: ignore[list-item]
    assert (st.n_base, st.n_head, st.call) == (2, 4, "n/a")


def test_integers_beyond_int64_are_taken_as_floats() -> None:
    # 10**30 has no NumPy integer type; as floats three equal samples have p10 == p90: sqrt(1) - 1 = 0
    assert stats.within_run_spread([10**30, 10**30, 10**30]) == 0.0


# --- the sort-based median, along any axis ----------------------------------------------------------------------


def test_sort_median_and_ratio_along_the_first_axis() -> None:
    x = np.random.default_rng(24).normal(1.0, 0.1, size=(6, 5))
    y = np.random.default_rng(25).normal(2.0, 0.1, size=(6, 5))
    for n in (5, 6):
        assert np.array_equal(stats._median(x[:n], axis=0), np.median(x[:n], axis=0))
    assert np.allclose(stats._ratio_of_medians(x, y, axis=0), np.median(y, axis=0) / np.median(x, axis=0))
    assert np.allclose(stats._ratio_of_medians(x, y, axis=1), np.median(y, axis=1) / np.median(x, axis=1))


# --- the noise band -------------------------------------------------------------------------------------------------


def test_within_run_spread_of_three_samples_by_hand() -> None:
    # NumPy's linear quantiles of 1, 2, 4: p10 at position 0.2 -> 1.2, p90 at 1.8 -> 3.6; sqrt(3.6 / 1.2) - 1
    assert stats.within_run_spread([1.0, 2.0, 4.0]) == pytest.approx(math.sqrt(3) - 1, rel=1e-12)


def test_within_run_spread_with_p10_at_zero_is_linear() -> None:
    # 20 samples: p10 at position 1.9 -> 0.0, p90 at 17.1 -> 3.0, median 1.0: (3 - 0) / 2 / 1
    assert stats.within_run_spread([0.0] * 3 + [1.0] * 14 + [3.0] * 3) == pytest.approx(1.5)


def test_within_run_spread_linear_is_relative_to_the_median() -> None:
    # p10 -1.0, p90 5.0, median 2.0: (5 - (-1)) / 2 / 2
    assert stats.within_run_spread([-1.0] * 3 + [2.0] * 14 + [5.0] * 3) == pytest.approx(1.5)


def test_within_run_spread_of_a_zero_median_is_none() -> None:
    assert stats.within_run_spread([-1.0, 0.0, 0.0, 0.0, 1.0]) is None
    assert stats.within_run_spread([-3.0, -2.0, -1.0]) is None


def test_noise_band_takes_either_side_alone() -> None:
    three = [1.0, 2.0, 4.0]  # spread sqrt(3) - 1 (above); [5.0] has too few samples for one
    for base, head in ((three, [5.0]), ([5.0], three)):
        band, source = stats.noise_band(base, head)
        assert band == pytest.approx(math.sqrt(3) - 1) and source == "within-run"
    # both sides: the larger; [1, 1.1, 1.21]: p10 1 + 0.2 * 0.1 = 1.02, p90 1.1 + 0.8 * 0.11 = 1.188 -> 0.0792
    assert stats.noise_band([1.0, 1.1, 1.21], three)[0] == pytest.approx(math.sqrt(3) - 1)
    assert stats.noise_band([1.0, 1.1, 1.21], [1.0] * 5)[0] == pytest.approx(math.sqrt(1.188 / 1.02) - 1)


def test_noise_band_without_enough_samples_on_either_side_is_zero() -> None:
    assert stats.noise_band([1.0], [2.0, 3.0]) == (0.0, "within-run")
    assert stats.noise_band([1.0], [2.0], calibrated=0.04) == (0.04, "calibration")
    assert stats.noise_band([1.0], [2.0], calibrated=float("nan")) == (0.0, "within-run")


# --- the A/A spread -------------------------------------------------------------------------------------------------


def test_aa_spread_of_two_runs_and_of_equal_runs() -> None:
    assert stats.aa_spread([1.0, 1.25]) == 0.25  # 1.25 / 1.0 - 1, exact in binary
    assert stats.aa_spread([1.25, 1.0]) == 0.25
    assert stats.aa_spread([2.0, 2.0]) == 0.0
    assert stats.aa_spread([2.0, 2.0, 2.0]) == 0.0


def test_aa_spread_skips_zero_negative_and_non_finite_medians() -> None:
    assert stats.aa_spread([0.0, 1.0, 1.25]) == 0.25
    assert stats.aa_spread([-1.0, 1.0, 1.25]) == 0.25
    assert stats.aa_spread([float("inf"), float("nan"), 1.0, 1.25]) == 0.25
    assert stats.aa_spread([0.0, 1.0]) is None


# --- underpowered and samples_needed --------------------------------------------------------------------------------


def test_underpowered_at_its_edges() -> None:
    # 1 against 40: the two extreme orderings of C(41, 1) = 41: 2 / 41 = 0.0488 <= 0.05 (3 / 41 would be 0.073)
    assert not stats.underpowered(1, 40) and not stats.underpowered(40, 1)
    assert stats.underpowered(1, 38) and stats.underpowered(38, 1)  # 2 / 39 = 0.0513
    assert stats.underpowered(0, 4) and stats.underpowered(4, 0) and stats.underpowered(0, 0)
    # 3 against 3: 2 / C(6, 3) = 2 / 20 = 0.1, not above an alpha of exactly 0.1
    assert not stats.underpowered(3, 3, 0.1) and stats.underpowered(3, 3, 0.0999)


def test_samples_needed_by_alpha() -> None:
    assert stats.samples_needed() == 4  # 2 / C(8, 4) = 0.029; 2 / C(6, 3) = 0.1
    assert stats.samples_needed(0.01) == 5  # 2 / C(10, 5) = 0.0079; 2 / C(8, 4) = 0.029
    assert stats.samples_needed(0.001) == 7  # 2 / C(14, 7) = 0.00058; 2 / C(12, 6) = 0.0022
    assert stats.samples_needed(0.2) == stats.MIN_SAMPLES == 3  # never below MIN_SAMPLES


# --- the call -------------------------------------------------------------------------------------------------------


def _st(lo: float | None, hi: float | None, band: float, n: int = 20) -> stats.CaseStats:
    return stats.CaseStats(1.0, lo, hi, 1e-6, None, band, "within-run", "n/a", n, n)


def test_call_at_p_equal_to_alpha_is_made() -> None:
    assert stats.call_case(_st(1.5, 1.6, 0.1), "lower", 0.05, 0.05) == "slower"
    assert stats.call_case(_st(1.5, 1.6, 0.1), "lower", 0.0500001, 0.05) == "within noise"


def test_an_interval_touching_the_band_is_within_noise() -> None:
    # band 0.25: [1 / 1.25, 1.25] = [0.8, 1.25], both exact in binary
    assert 1.0 / (1.0 + 0.25) == 0.8
    assert stats.call_case(_st(1.25, 1.4, 0.25), "lower", 1e-6, 0.05) == "within noise"
    assert stats.call_case(_st(1.2500001, 1.4, 0.25), "lower", 1e-6, 0.05) == "slower"
    assert stats.call_case(_st(0.7, 0.8, 0.25), "lower", 1e-6, 0.05) == "within noise"
    assert stats.call_case(_st(0.7, 0.7999999, 0.25), "lower", 1e-6, 0.05) == "faster"


def test_higher_is_better_above_the_band_is_faster() -> None:
    assert stats.call_case(_st(1.5, 1.6, 0.1), "higher", 1e-6, 0.05) == "faster"
    assert stats.call_case(_st(0.5, 0.6, 0.1), "higher", 1e-6, 0.05) == "slower"


def test_a_missing_interval_p_value_or_direction_is_not_called() -> None:
    # one end missing is judged by the other (test_a_half_known_interval_is_judged_by_its_known_end)
    assert stats.call_case(_st(None, None, 0.1), "lower", 1e-6, 0.05) == "n/a"
    assert stats.call_case(_st(1.5, 1.6, 0.1), "lower", None, 0.05) == "n/a"
    assert stats.call_case(_st(1.5, 1.6, 0.1), None, 1e-6, 0.05) == "n/a"


def test_underpowered_is_judged_at_the_given_alpha() -> None:
    # 3 against 3: best p 0.1 -- callable at alpha 0.2, not at 0.05
    assert stats.call_case(_st(1.5, 1.6, 0.1, n=3), "lower", 0.1, 0.2) == "slower"
    assert stats.call_case(_st(1.5, 1.6, 0.1, n=3), "lower", 0.04, 0.05) == "n/a"


def test_call_cases_recomputes_the_call_from_q() -> None:
    called = stats.CaseStats(1.5, 1.4, 1.6, 0.04, None, 0.1, "within-run", "slower", 20, 20)
    null = stats.CaseStats(1.0, 0.9, 1.1, 0.5, None, 0.1, "within-run", "within noise", 20, 20)
    out = stats.call_cases([called, null], "lower")
    # BH: 0.04 * 2 / 1 = 0.08, 0.5 * 2 / 2 = 0.5 -> 0.08 > 0.05: no longer called
    assert [c.q_value for c in out] == [pytest.approx(0.08), pytest.approx(0.5)]
    assert [c.call for c in out] == ["within noise", "within noise"]
    assert [c.q_value for c in stats.call_cases([called], "lower")] == [pytest.approx(0.04)]
    assert stats.call_cases([called], "lower")[0].call == "slower"


def test_call_cases_judges_power_at_the_given_alpha() -> None:
    small = stats.CaseStats(1.5, 1.4, 1.6, 0.1, None, 0.1, "within-run", "n/a", 3, 3)
    out = stats.call_cases([small, small], "lower", alpha=0.2)
    # BH over two p of 0.1: 0.1 * 2 / 2 = 0.1 for both; 0.1 <= 0.2 and the interval is above 1.1
    assert [c.q_value for c in out] == [pytest.approx(0.1)] * 2 and [c.call for c in out] == ["slower"] * 2
    assert [(c.q_value, c.call) for c in stats.call_cases([small], "lower")] == [(None, "n/a")]


def test_bh_adjust_takes_integer_p_values() -> None:
    # p of exactly 0 and 1 (as ints): sorted 0, 1 -> 0 * 2 / 1 = 0, 1 * 2 / 2 = 1
    assert stats.bh_adjust([1, 0]) == [1.0, 0.0]
    assert stats.bh_adjust([0.01, 0.04, 0.03, 0.20]) == pytest.approx(
        list(sps.false_discovery_control([0.01, 0.04, 0.03, 0.20], method="bh"))
    )


def test_an_interval_end_that_is_not_finite_is_unknown_never_the_ratio() -> None:
    """Base [0]*8 + [1]*12 (median 1) against head [3]*20: a resampled base median is 0, 0.5 or 1, so the
    resampled ratios are inf, 6 or 3 — the interval's upper end is not finite. It was reported as [3.0, 3.0]
    (the ratio), a certainty the data do not hold; now the end is unknown (None) and the call rests on the known
    end: ci_low 3.0 > 1 (every resample's ratio is at least 3/1)."""
    st = compare_samples([0.0] * 8 + [1.0] * 12, [3.0] * 20)
    assert (st.ratio, st.ci_low, st.ci_high, st.call) == (3.0, 3.0, None, "slower")
    const = compare_samples([1.0] * 8, [2.0] * 8)  # constant sides: every resample gives 2/1 exactly
    assert (const.ratio, const.ci_low, const.ci_high) == (2.0, 2.0, 2.0)


@pytest.mark.parametrize(
    ("low", "high", "call"),
    [(1.2, None, "slower"), (1.05, None, "within noise"), (None, 0.8, "faster"), (None, 0.95, "within noise"),
     (None, None, "n/a")],
)  # fmt: skip
def test_a_half_known_interval_is_judged_by_its_known_end(low: float | None, high: float | None, call: str) -> None:
    st = CaseStats(1.0, low, high, 0.001, None, 0.1, "within-run", "n/a", 8, 8)  # band 0.1: [1/1.1, 1.1]
    assert call_case(st, "lower", 0.001, 0.05) == call


def test_an_unknown_interval_end_prints_as_a_question_mark() -> None:
    assert (ci_text(None, 1.02), ci_text(0.98, None), ci_text(0.98, 1.02)) == ("?–1.020", "0.980–?", "0.980–1.020")
