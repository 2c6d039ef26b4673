"""compare: the edges mutation testing found untested (scripts/mutation.sh orchestrator/analysis/compare.py) —
boundaries of the noise judgement, skipped metrics and cases, defaults, and the messages of bad input."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.analysis.compare import compare, is_noisy, metric_direction


def r(m: int, **metrics: Any) -> dict[str, Any]:
    return {"case": {"M": m}, "metrics": metrics}


@pytest.mark.parametrize(
    ("base", "head", "noisy"),
    [
        # Ranges touching end to end, each spread (~0.01) below the change (~0.02): noisy by the overlap alone.
        ((10.1, 10.0, 10.1), (9.9, 9.9, 10.0), True),
        # One p90 missing (base): unknown, before any arithmetic on it.
        ((1.0, 0.9, None), (1.0, 0.9, 1.1), None),
        # Apart; change 3.0 (x4) far above both spreads.
        ((0.5, 0.49, 0.51), (2.0, 1.99, 2.01), False),
        # Apart; base's relative spread 0.4 (of a median of 0.5) above the change 0.3.
        ((0.5, 0.4, 0.6), (0.65, 0.64, 0.66), True),
        # Spread exactly the change as factors (ln 2 against |ln 2|, ln 0.5 = -ln 2 exactly): not above it, not
        # noisy — base side, then head side.
        ((1.0, 0.75, 1.5), (2.0, 1.99, 2.01), False),
        ((1.0, 0.99, 1.01), (0.5, 0.25, 0.5), False),
        # The same spreads a hair wider than the change: noisy.
        ((1.0, 0.75, 1.51), (2.0, 1.99, 2.01), True),
        ((1.0, 0.99, 1.01), (0.5, 0.249, 0.5), True),
        # A p10 <= 0 has no factor: compared linearly, (p90 - p10) / median against |head/base - 1|.
        ((1.0, 0.99, 1.01), (0.5, -0.1, 0.6), True),  # 1.4 > 0.5
        ((1.0, -0.1, 1.1), (10.0, 9.9, 10.1), False),  # base side: 1.2 < 9
        ((1.0, -0.1, 1.1), (2.0, 1.9, 2.1), True),  # base side: 1.2 > 1
        ((1.0, 0.99, 1.01), (0.5, 0.0, 0.6), True),  # a p10 of exactly 0 is linear too (no division by it)
        ((1.0, 0.0, 1.0), (2.0, 1.5, 2.5), False),  # linear spread 1.0 exactly the change 1.0: not above it
        # Head's p10 touching base's p90, spreads below the change: noisy by the overlap test alone.
        ((1.0, 0.999, 1.001), (1.1, 1.001, 1.1), True),
        # Head's relative spread 1.0 (of a median of 0.5, below 1) above the change 0.5.
        ((1.0, 0.99, 1.01), (0.5, 0.1, 0.6), True),
        # A head median of 0 has no relative spread (no division by it).
        ((1.0, 0.99, 1.01), (0.0, -0.01, 0.01), False),
    ],
)
def test_is_noisy_boundaries(
    base: tuple[float, float | None, float | None], head: tuple[float, float | None, float | None], noisy: bool | None
) -> None:
    assert is_noisy(*base, *head) is noisy


def test_direction_by_unit_first_then_by_name() -> None:
    assert metric_direction("output_throughput") == "higher"  # no unit: the name decides
    assert metric_direction("decode_tok_s", "") == "higher"
    assert metric_direction("time_ms") == "lower"
    assert metric_direction("step", "ms") == "lower"  # a name of no direction, a unit of one


def test_compare_uses_the_unit_for_direction_and_reports_it() -> None:
    c = compare([r(1, step={"value": 1.0, "unit": "ms"})], [r(1, step={"value": 2.0, "unit": "ms"})])
    assert [(x.unit, x.direction, x.verdict) for x in c.cases] == [("ms", "lower", "regression")]
    no_unit = compare([r(1, count={"value": 1.0})], [r(1, count={"value": 1.0})])
    assert [(x.unit, x.direction, x.verdict) for x in no_unit.cases] == [("", None, "n/a")]


def test_skipped_cases_and_metrics_do_not_stop_the_rest() -> None:
    base = [r(1, t={"value": 1.0, "unit": "ms"}), r(2, t={"value": 1.0, "unit": "ms"})]
    head = [r(2, t={"value": 1.5, "unit": "ms"})]  # M=1 only in base: skipped, M=2 still compared
    assert [(x.key, x.ratio) for x in compare(base, head).cases] == [("M=2", 1.5)]
    two = {"a": {"value": 1.0, "unit": "ms"}, "b": {"value": 1.0, "unit": "ms"}}
    c = compare([r(1, **two)], [r(1, **two)], metrics=["b"])  # a filtered-out first metric
    assert [x.metric for x in c.cases] == ["b"]
    bad_first = {"a": {"value": "fast", "unit": "ms"}, "b": {"value": 1.0, "unit": "ms"}}
    assert [x.metric for x in compare([r(1, **bad_first)], [r(1, **two)]).cases] == ["b"]
    assert [x.metric for x in compare([r(1, **two)], [r(1, **bad_first)]).cases] == ["b"]  # either side


def test_zero_head_has_a_ratio_of_zero_outside_the_geomean() -> None:
    base = [r(1, t={"value": 2.0, "unit": "ms"}), r(2, t={"value": 2.0, "unit": "ms"})]
    head = [r(1, t={"value": 0.0, "unit": "ms"}), r(2, t={"value": 4.0, "unit": "ms"})]
    c = compare(base, head)
    assert [x.ratio for x in c.cases] == [0.0, 2.0]
    assert c.geomean == {"t": 2.0}


def test_threshold_is_used_and_reported_and_zero_is_allowed() -> None:
    base, head = [r(1, t={"value": 1.0, "unit": "ms"})], [r(1, t={"value": 1.08, "unit": "ms"})]
    wide = compare(base, head, threshold=0.1)
    assert (wide.threshold, wide.cases[0].verdict) == (0.1, "unchanged")
    exact = compare(base, head, threshold=0.0)
    assert (exact.threshold, exact.cases[0].verdict) == (0.0, "regression")


def test_duplicates_are_named_with_their_side() -> None:
    one, dup = [r(1, t={"value": 1.0, "unit": "ms"})], [r(1, t={"value": 1.0, "unit": "ms"})] * 2
    with pytest.raises(ValueError) as exc:
        compare(one, dup)
    assert str(exc.value) == "head has two results for case 'M=1'; pair by a key that tells them apart"
    with pytest.raises(ValueError) as exc:
        compare(dup, one)
    assert str(exc.value) == "base has two results for case 'M=1'; pair by a key that tells them apart"
    with pytest.raises(ValueError) as exc:
        compare(one, one, threshold=-0.01)
    assert str(exc.value) == "threshold must be >= 0, got -0.01"


def test_log_band_is_the_half_width_as_a_factor() -> None:
    from orchestrator.analysis.compare import log_band

    assert log_band(0.230, 0.222, 9.57) == pytest.approx((9.57 / 0.222) ** 0.5 - 1, rel=1e-12)  # 5.57
    assert log_band(1.0, 0.25, 1.0) == 1.0  # sqrt(4) - 1, binary-exact
    assert log_band(1.0, 1.0, 1.0) == 0.0
    assert log_band(1.0, 0.0, 1.0) == float("inf")  # p10 of 0: no factor bounds it
    assert log_band(1.0, -1.0, 1.0) == float("inf")
    assert log_band(1.0, -1.0, 0.0) is None and log_band(1.0, -1.0, -0.5) is None
    assert log_band(0.0, 0.5, 1.0) is None and log_band(-1.0, 0.5, 1.0) is None  # no positive median
    assert log_band(1.0, 1.5, 0.5) is None  # p90 below p10
    assert log_band(1.0, None, 1.0) is None and log_band(1.0, 0.5, "2") is None and log_band(True, 0.5, 2.0) is None
    assert log_band(1.0, 0.5, float("nan")) is None


def test_too_noisy_is_a_band_above_fifty_percent_on_either_side() -> None:
    from orchestrator.analysis.compare import NOT_JUDGED_BAND, too_noisy

    assert NOT_JUDGED_BAND == 0.5
    quiet = (1.0, 0.99, 1.01)
    assert not too_noisy(*quiet, *quiet)
    assert not too_noisy(1.0, 0.64, 1.44, *quiet)  # sqrt(2.25) - 1 = 0.5 exactly: at the limit, not above
    assert too_noisy(1.0, 0.64, 1.45, *quiet)  # base side
    assert too_noisy(*quiet, 1.0, 0.64, 1.45)  # head side
    assert not too_noisy(*quiet, 1.0, None, 1.45)  # unknown band: not called too noisy
    assert too_noisy(*quiet, 1.0, 0.9, 1.1, limit=0.05)


def test_noise_verdict_says_noisy_not_judged_only_for_a_noisy_case_too_wide_to_judge() -> None:
    from orchestrator.analysis.compare import noise_verdict

    assert noise_verdict(1.01, "lower", True, 0.05, True) == "noisy: not judged"
    assert noise_verdict(1.01, "lower", True, 0.05, False) == "within noise"
    assert noise_verdict(1.5, "lower", False, 0.05, True) == "regression"  # apart from its noise: judged
    assert noise_verdict(1.01, "lower", None, 0.05, True) == "unchanged"


def test_compare_marks_a_noisy_case_too_wide_to_judge() -> None:
    def t(median: float, p10: float, p90: float) -> dict[str, Any]:
        return {"unit": "ms", "median": median, "p10": p10, "p90": p90}

    base = [r(1, time_ms=t(1.0, 0.9, 5.0)), r(2, time_ms=t(212.0, 182.0, 281.0)), r(4, time_ms=t(1.0, 0.95, 1.05))]
    head = [r(1, time_ms=t(1.1, 1.0, 5.0)), r(2, time_ms=t(0.230, 0.222, 9.57)), r(4, time_ms=t(1.02, 0.97, 1.07))]
    c = compare(base, head)
    assert [(x.key, x.noisy, x.verdict) for x in c.cases] == [
        ("M=1", True, "noisy: not judged"),  # overlapping, base's band sqrt(5 / 0.9) - 1 = 1.36
        ("M=2", False, "improvement"),  # the finding: 0.001x, "within noise" of a linear band 1 +/- 20.3
        ("M=4", True, "within noise"),  # overlapping, quiet
    ]
    # the head side alone too wide: not judged either
    one = compare([r(1, time_ms=t(1.0, 0.95, 1.05))], [r(1, time_ms=t(1.1, 0.9, 5.0))])
    assert [(x.noisy, x.verdict) for x in one.cases] == [(True, "noisy: not judged")]


# Every unit and name fragment the direction rule knows, written out here (not read from compare.py): deleting one
# from its table left every test green, and a metric without a direction is never judged (verdict n/a), so a
# regression in it would never be flagged (variant tester, session 5).
LOWER_UNITS = ("ms", "us", "µs", "s", "ns", "s/token", "ms/token", "us/token", "µs/token")
HIGHER_UNITS = ("GB/s", "TB/s", "TFLOP/s", "tokens/s", "tok/s", "token/s", "req/s", "%", "1/s")
LOWER_NAMES = ("time", "latency", "ttft", "tpot", "itl", "e2e", "us_per_token", "x_ms", "x_us", "x_s")
HIGHER_NAMES = ("gbps", "tflops", "throughput", "tokens_per_s", "tok_s", "pct", "accept")


@pytest.mark.parametrize(
    ("unit", "direction"), [(u, "lower") for u in LOWER_UNITS] + [(u, "higher") for u in HIGHER_UNITS]
)
def test_each_known_unit_has_its_direction(unit: str, direction: str) -> None:
    assert metric_direction("value", unit) == direction  # "value": a name that says nothing


@pytest.mark.parametrize(
    ("name", "direction"), [(n, "lower") for n in LOWER_NAMES] + [(n, "higher") for n in HIGHER_NAMES]
)
def test_each_known_name_has_its_direction_without_a_unit(name: str, direction: str) -> None:
    assert metric_direction(name, "") == direction
    assert metric_direction(f"{name}_p50".upper(), "count") == direction  # a fragment inside a name, any case
