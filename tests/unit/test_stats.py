"""analysis.stats on synthetic samples of known distributions (normal, seeded)."""

from __future__ import annotations

import numpy as np
import pytest

from orchestrator.analysis import stats


def _normal(rng: np.random.Generator, center: float, rel_sd: float, n: int) -> list[float]:
    return list(rng.normal(center, center * rel_sd, n))


def _case(base: list[float], head: list[float], direction: str | None = "lower") -> stats.CaseStats:
    band, source = stats.noise_band(base, head)
    return stats.compare_samples(base, head, band=band, band_source=source, direction=direction)  # type: ignore[arg-type]


def test_five_percent_shift_with_one_percent_noise_is_called_slower() -> None:
    rng = np.random.default_rng(1)
    called = 0
    for _ in range(20):
        st = _case(_normal(rng, 1.0, 0.01, 20), _normal(rng, 1.05, 0.01, 20))
        assert st.ratio == pytest.approx(1.05, abs=0.01)
        assert st.ci_low is not None and st.ci_high is not None and st.ci_low < st.ratio < st.ci_high
        called += st.call == "slower"
    assert called == 20


def test_direction_decides_slower_or_faster() -> None:
    rng = np.random.default_rng(2)
    base, head = _normal(rng, 100.0, 0.01, 20), _normal(rng, 95.0, 0.01, 20)  # head 5% lower
    assert _case(base, head, "lower").call == "faster"  # a time went down
    assert _case(base, head, "higher").call == "slower"  # a bandwidth went down
    assert _case(base, head, None).call == "n/a"


def test_aa_false_positive_rate_over_200_pairs_at_most_5_percent() -> None:
    rng = np.random.default_rng(3)
    calls = [_case(_normal(rng, 1.0, 0.01, 20), _normal(rng, 1.0, 0.01, 20)).call for _ in range(200)]
    false = sum(c in ("slower", "faster") for c in calls)
    assert false / 200 <= 0.05
    assert calls.count("within noise") == 200 - false


def test_aa_with_heavy_tail_is_not_called() -> None:
    rng = np.random.default_rng(4)
    calls = []
    for _ in range(200):
        base = list(1.0 + rng.exponential(0.02, 20))
        head = list(1.0 + rng.exponential(0.02, 20))
        calls.append(_case(base, head).call)
    assert sum(c != "within noise" for c in calls) / 200 <= 0.05


def test_bh_over_100_null_cases_controls_false_discoveries() -> None:
    rng = np.random.default_rng(5)
    any_false = 0
    for _ in range(40):
        p = [float(x) for x in rng.uniform(0, 1, 100)]  # null p-values are uniform
        q = stats.bh_adjust(p)
        assert all(qi >= pi for qi, pi in zip(q, p, strict=True))
        any_false += any(qi <= stats.ALPHA for qi in q)
    # all hypotheses null: FDR = P(any discovery) <= alpha; 40 families, allow binomial slack
    assert any_false <= 6
    # without adjustment, about 5 of every 100 null cases would be called
    assert sum(pi <= stats.ALPHA for pi in p) >= 1


def test_bh_on_null_samples_calls_nothing_and_finds_true_shifts() -> None:
    rng = np.random.default_rng(6)
    cases = [_case(_normal(rng, 1.0, 0.01, 20), _normal(rng, 1.0, 0.01, 20)) for _ in range(100)]
    cases += [_case(_normal(rng, 1.0, 0.01, 20), _normal(rng, 1.08, 0.01, 20)) for _ in range(5)]
    out = stats.call_cases(cases, "lower")
    assert all(c.q_value is not None and c.p_value is not None and c.q_value >= c.p_value for c in out)
    assert [c.call for c in out[100:]] == ["slower"] * 5
    assert sum(c.call != "within noise" for c in out[:100]) <= 1


def test_bh_matches_the_step_up_definition() -> None:
    p = [0.01, 0.04, 0.03, 0.20]
    # sorted p: 0.01, 0.03, 0.04, 0.20 -> p*m/rank: 0.04, 0.06, 0.0533, 0.20 -> cumulative min from the top
    assert stats.bh_adjust(p) == pytest.approx([0.04, 0.0533333, 0.0533333, 0.20])
    assert stats.bh_adjust([]) == []


def test_seeded_bootstrap_is_reproducible() -> None:
    rng = np.random.default_rng(7)
    base, head = _normal(rng, 1.0, 0.02, 15), _normal(rng, 1.03, 0.02, 15)
    assert _case(base, head) == _case(base, head)
    other = stats.compare_samples(base, head, seed=1)
    assert (other.ci_low, other.ci_high) != (_case(base, head).ci_low, _case(base, head).ci_high)


def test_calibrated_band_wider_than_the_shift_keeps_it_within_noise() -> None:
    rng = np.random.default_rng(8)
    base, head = _normal(rng, 1.0, 0.005, 20), _normal(rng, 1.05, 0.005, 20)
    assert _case(base, head).call == "slower"
    band, source = stats.noise_band(base, head, calibrated=0.08)  # identical runs moved 8% apart
    assert (band, source) == (0.08, "calibration")
    assert stats.compare_samples(base, head, band=band, band_source=source).call == "within noise"
    # a calibration narrower than the within-run spread does not narrow the band
    assert stats.noise_band(base, head, calibrated=0.0)[0] == stats.noise_band(base, head)[0] > 0


def test_too_few_samples_or_non_positive_medians_are_not_tested() -> None:
    assert stats.compare_samples([1.0, 1.1], [2.0, 2.1, 2.2]).call == "n/a"
    st = stats.compare_samples([0.0, 0.0, 0.0], [1.0, 1.0, 1.0])
    assert (st.call, st.ratio, st.n_base, st.n_head) == ("n/a", None, 3, 3)
    assert stats.compare_samples([1.0, float("nan"), 1.0], [1.0] * 5).n_base == 2


def test_identical_constant_samples_are_within_noise() -> None:
    st = stats.compare_samples([2.0] * 10, [2.0] * 10)
    assert (st.ratio, st.ci_low, st.ci_high, st.p_value, st.call) == (1.0, 1.0, 1.0, 1.0, "within noise")
    moved = stats.compare_samples([2.0] * 10, [3.0] * 10)  # constant on each side, apart: a clear change
    assert (moved.ratio, moved.ci_low, moved.ci_high, moved.call) == (1.5, 1.5, 1.5, "slower")


def test_aa_spread_and_within_run_spread() -> None:
    assert stats.aa_spread([1.0, 1.02, 0.99]) == pytest.approx(1.02 / 0.99 - 1)
    assert stats.aa_spread([1.0]) is None
    assert stats.within_run_spread([1.0, 2.0]) is None
    rng = np.random.default_rng(9)
    assert stats.within_run_spread(_normal(rng, 1.0, 0.01, 20_000)) == pytest.approx(0.0128, abs=0.001)


def test_bad_arguments_raise() -> None:
    with pytest.raises(ValueError, match="confidence"):
        stats.compare_samples([1.0] * 3, [1.0] * 3, confidence=1.0)
    with pytest.raises(ValueError, match="band"):
        stats.compare_samples([1.0] * 3, [1.0] * 3, band=-0.1)


def test_three_against_three_samples_cannot_be_called() -> None:
    assert stats.underpowered(3, 3) and not stats.underpowered(4, 4)
    st = stats.compare_samples([2.0, 2.1, 1.9], [1.0, 1.05, 0.95])  # halved, but 3 vs 3: best p is 0.1
    assert (st.ratio, st.p_value, st.call) == (0.5, pytest.approx(0.1), "n/a")
    out = stats.call_cases([st, stats.compare_samples([1.0] * 3 + [1.1], [2.0] * 3 + [2.1])], "lower")
    assert out[0].q_value is None and out[1].q_value == out[1].p_value and out[1].call == "slower"


def test_many_cases_at_once_equal_each_case_alone() -> None:
    """compare_many batches cases by sample counts; a case's figures never depend on the others."""
    rng = np.random.default_rng(10)
    cases: list[stats.CaseInput] = [
        (_normal(rng, 1.0, 0.01, 20), _normal(rng, 1.0 + 0.01 * (i % 7), 0.01, 20), 0.01, "within-run")
        for i in range(30)
    ]
    cases += [(list(np.round(_normal(rng, 1.0, 0.01, 5), 2)), _normal(rng, 1.1, 0.01, 6), 0.02, "calibration")
              for _ in range(5)]  # fmt: skip
    cases.append(([1.0, 2.0], [1.0, 2.0, 3.0], 0.0, "within-run"))
    together = stats.compare_many(cases)
    alone = [stats.compare_samples(b, h, band=band, band_source=src) for b, h, band, src in cases]
    assert together == alone and together[-1].call == "n/a"


def test_sort_median_equals_numpys() -> None:
    x = np.random.default_rng(11).normal(size=(7, 5, 20))
    for n in (1, 2, 19, 20):
        assert np.array_equal(stats._median(x[..., :n]), np.median(x[..., :n], axis=-1))


def _st(lo: float, hi: float, band: float, n: int = 20) -> stats.CaseStats:
    return stats.CaseStats((lo + hi) / 2, lo, hi, 1e-6, None, band, "within-run", "n/a", n, n)


def test_the_band_is_log_symmetric_so_a_wide_band_still_lets_a_speed_up_be_called() -> None:
    """The finding: a band of 20.3 made [1 - band, 1 + band] reach below 0, and a 0.001x head was within noise."""
    assert stats.call_case(_st(0.00103, 0.00112, 5.57), "lower", 4.8e-7, 0.05) == "faster"
    assert stats.call_case(_st(0.00103, 0.00112, 5.57), "higher", 4.8e-7, 0.05) == "slower"
    assert stats.call_case(_st(1370.0, 1390.0, 5.57), "lower", 4.8e-7, 0.05) == "slower"
    # the lower edge is 1 / (1 + band), not 1 - band: 0.66 is inside 1/1.6 = 0.625, 0.62 outside
    assert stats.call_case(_st(0.60, 0.66, 0.6), "lower", 1e-6, 0.05) == "noisy"
    assert stats.call_case(_st(0.60, 0.62, 0.6), "lower", 1e-6, 0.05) == "faster"
    assert stats.call_case(_st(0.80, 0.82, 0.2), "lower", 1e-6, 0.05) == "faster"  # 1/1.2 = 0.833
    assert stats.call_case(_st(0.84, 0.86, 0.2), "lower", 1e-6, 0.05) == "within noise"


def test_a_band_wider_than_fifty_percent_is_noisy_not_within_noise() -> None:
    assert stats.call_case(_st(0.9, 1.2, 0.5), "lower", 1e-6, 0.05) == "within noise"  # at the limit
    assert stats.call_case(_st(0.9, 1.2, 0.51), "lower", 1e-6, 0.05) == "noisy"
    assert stats.call_case(_st(0.9, 1.2, 0.51), "lower", 0.5, 0.05) == "noisy"  # p above alpha, still noisy
    assert stats.call_case(_st(0.9, 1.2, 0.1), "lower", 0.5, 0.05) == "within noise"
    assert stats.call_case(_st(1.6, 1.7, 0.51), "lower", 1e-6, 0.05) == "slower"  # outside even a wide band


def test_within_run_spread_is_on_a_log_scale() -> None:
    xs = [0.222] * 3 + [0.23] * 14 + [9.57] * 3  # p10 0.222, p90 9.57
    assert stats.within_run_spread(xs) == pytest.approx((9.57 / 0.222) ** 0.5 - 1, rel=1e-9)
    # a p10 <= 0: no factor bounds it; half the linear width relative to the median
    assert stats.within_run_spread([-1.0] * 3 + [1.0] * 14 + [3.0] * 3) == pytest.approx(2.0)
