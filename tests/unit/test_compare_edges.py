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
        # Spread exactly the change (binary-exact numbers): not above it, not noisy — base side, then head side.
        ((1.0, 0.75, 1.25), (1.5, 1.4375, 1.5625), False),
        ((1.0, 0.9375, 1.0625), (0.5, 0.375, 0.625), False),
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
