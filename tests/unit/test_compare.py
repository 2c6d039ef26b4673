"""compare: head/base ratio of medians per paired case, geometric mean, verdicts by direction."""

from __future__ import annotations

import math
from typing import Any

import pytest

from orchestrator.analysis.compare import (
    case_key,
    compare,
    is_noisy,
    is_wide,
    metric_direction,
    noise_verdict,
    relative_spread,
    verdict,
    verdict_counts,
    wide_sides,
)


def row(m: int, time_ms: float, gbps: float, host: str | None = None, **extra: Any) -> dict[str, Any]:
    r: dict[str, Any] = {
        "case": {"M": m, "E": 384},
        "metrics": {
            "time_ms": {"value": time_ms + 99, "unit": "ms", "median": time_ms},  # median wins over value
            "gbps": {"value": gbps, "unit": "GB/s"},
            "distinct_experts": {"value": 8, "unit": "experts"},
            **extra,
        },
    }
    if host is not None:
        r["host"] = host
    return r


def test_ratios_geomean_and_verdicts() -> None:
    base = [row(1, 1.0, 100.0), row(2, 2.0, 200.0), row(4, 4.0, 400.0), row(8, 8.0, 800.0)]
    head = [row(1, 1.2, 100.0), row(2, 1.0, 200.0), row(4, 4.1, 420.0), row(16, 16.0, 1600.0)]
    c = compare(base, head)
    times = {x.key: x for x in c.cases if x.metric == "time_ms"}
    assert {k: (x.ratio, x.verdict) for k, x in times.items()} == {
        "E=384 M=1": (1.2, "regression"),  # 20% slower
        "E=384 M=2": (0.5, "improvement"),
        "E=384 M=4": (1.025, "unchanged"),
    }
    assert times["E=384 M=1"].change == pytest.approx(0.2, rel=1e-12)
    assert times["E=384 M=1"].base == 1.0 and times["E=384 M=1"].head == 1.2
    gbps = {x.key: x.verdict for x in c.cases if x.metric == "gbps"}
    assert gbps == {"E=384 M=1": "unchanged", "E=384 M=2": "unchanged", "E=384 M=4": "unchanged"}
    de = [x.verdict for x in c.cases if x.metric == "distinct_experts"]
    assert de == ["n/a", "n/a", "n/a"]  # no direction for a count
    assert c.geomean["time_ms"] == pytest.approx((1.2 * 0.5 * 1.025) ** (1 / 3), rel=1e-12)
    assert c.geomean["gbps"] == pytest.approx(1.05 ** (1 / 3), rel=1e-12)
    assert c.only_base == ["E=384 M=8"] and c.only_head == ["E=384 M=16"]
    assert [x.key for x in c.regressions] == ["E=384 M=1"]
    assert [(x.key, x.metric) for x in c.improvements] == [("E=384 M=2", "time_ms")]
    doc = c.to_dict()
    assert doc["threshold"] == 0.05 and doc["cases"][0] == {
        "key": "E=384 M=1",
        "metric": "time_ms",
        "unit": "ms",
        "base": 1.0,
        "head": 1.2,
        "ratio": 1.2,
        "change": pytest.approx(0.2),
        "direction": "lower",
        "verdict": "regression",
        "noisy": None,  # no p10/p90 in these rows
    }


def test_higher_is_better_and_threshold() -> None:
    base = [row(1, 1.0, 100.0)]
    head = [row(1, 1.0, 90.0)]
    (g,) = [x for x in compare(base, head).cases if x.metric == "gbps"]
    assert (g.ratio, g.direction, g.verdict) == (0.9, "higher", "regression")
    (g,) = [x for x in compare(base, head, threshold=0.2).cases if x.metric == "gbps"]
    assert g.verdict == "unchanged"
    (g,) = [x for x in compare(head, base).cases if x.metric == "gbps"]
    assert g.verdict == "improvement"


def test_exactly_at_threshold_is_unchanged() -> None:
    assert verdict(105 / 100, "lower") == "unchanged"
    assert verdict(95 / 100, "lower") == "unchanged"
    assert verdict(1.06, "lower") == "regression"
    assert verdict(0.94, "higher") == "regression"
    assert verdict(None, "lower") == "n/a"
    assert verdict(2.0, None) == "n/a"


def test_metrics_filter_zero_base_and_hosts() -> None:
    base = [row(1, 0.0, 100.0, host="a"), row(1, 2.0, 100.0, host="b")]
    head = [row(1, 1.0, 100.0, host="a"), row(1, 3.0, 100.0, host="b")]
    c = compare(base, head, metrics=["time_ms"])
    assert [(x.key, x.ratio, x.verdict) for x in c.cases] == [
        ("host=a E=384 M=1", None, "n/a"),
        ("host=b E=384 M=1", 1.5, "regression"),
    ]
    assert c.geomean == {"time_ms": 1.5}
    assert compare([], []).to_dict() == {
        "threshold": 0.05,
        "geomean": {},
        "cases": [],
        "only_base": [],
        "only_head": [],
    }


def test_custom_key_and_duplicates() -> None:
    base = [row(1, 1.0, 1.0, host="a"), row(1, 2.0, 1.0, host="b")]
    with pytest.raises(ValueError, match="base has two results for case 'E=384 M=1'"):
        compare(base, base, key=lambda r: case_key({"case": r["case"]}))
    with pytest.raises(ValueError, match="threshold"):
        compare([], [], threshold=-0.1)


def test_case_key() -> None:
    assert case_key({"host": "h", "case": {"M": 4, "E": 8, "dims": [1, 2]}}) == "host=h E=8 M=4 dims=1,2"
    assert case_key({"case": {}}) == ""


@pytest.mark.parametrize(
    ("name", "unit", "direction"),
    [
        ("time_ms", "ms", "lower"),
        ("us_per_token", "µs", "lower"),
        ("median_ttft_ms", "", "lower"),
        ("tpot", "", "lower"),
        ("gbps", "GB/s", "higher"),
        ("tflops", "TFLOP/s", "higher"),
        ("output_throughput", "tokens/s", "higher"),
        ("pct_peak", "%", "higher"),
        ("weight_bytes", "B", None),
        ("distinct_experts", "experts", None),
    ],
)
def test_metric_direction(name: str, unit: str, direction: str | None) -> None:
    assert metric_direction(name, unit) == direction


def test_geomean_of_inverse_ratios_is_one() -> None:
    base = [row(1, 1.0, 1.0), row(2, 4.0, 1.0)]
    head = [row(1, 2.0, 1.0), row(2, 2.0, 1.0)]
    assert math.isclose(compare(base, head).geomean["time_ms"], 1.0, rel_tol=1e-15)


@pytest.mark.parametrize(
    ("base", "head", "noisy"),
    [
        ((1.0, 0.99, 1.01), (1.10, 1.09, 1.11), False),  # apart; spreads 0.02 and 0.0182 < change 0.1
        ((1.0, 0.99, 1.01), (1.02, 1.01, 1.03), True),  # ranges touch at 1.01
        ((1.0, 0.95, 1.05), (1.03, 0.99, 1.07), True),  # ranges overlap
        ((1.0, 0.90, 0.99), (1.02, 1.00, 1.04), True),  # apart, but base's spread 0.09 > change 0.02
        ((1.0, 0.995, 1.005), (1.10, 1.01, 1.21), True),  # apart, but head's spread 0.2/1.1 = 0.18 > change 0.1
        ((0.17, 0.16, 53.0), (0.04, 0.039, 0.041), True),  # a 53 ms p90 tail: spread ~311 > change 0.76
        ((2.0, 1.9, 2.1), (1.0, 0.95, 1.05), False),  # a clear halving
        ((1.0, None, 1.01), (1.10, 1.09, 1.11), None),  # no p10 on one side: unknown
        ((1.0, 0.99, 1.01), (1.10, 1.09, None), None),
        ((0.0, -0.1, 0.1), (1.0, 0.9, 1.1), False),  # apart; a median of 0 has no relative spread
        ((-1.0, -1.1, -0.9), (1.0, 0.9, 1.1), False),
    ],
)
def test_is_noisy(
    base: tuple[float, float | None, float | None], head: tuple[float, float | None, float | None], noisy: bool | None
) -> None:
    assert is_noisy(base[0], base[1], base[2], head[0], head[1], head[2]) is noisy


def test_noise_verdict_keeps_direction_but_says_within_noise() -> None:
    assert noise_verdict(1.5, "lower", True) == "within noise"
    assert noise_verdict(1.5, "lower", False) == "regression"
    assert noise_verdict(1.5, "lower", None) == "regression"  # unknown noise: the threshold alone
    assert noise_verdict(0.5, "higher", False) == "regression"
    assert noise_verdict(1.01, "lower", True) == "within noise"
    assert noise_verdict(1.01, "lower", False) == "unchanged"
    assert noise_verdict(None, "lower", True) == "within noise"
    assert noise_verdict(2.0, None, False) == "n/a"
    assert noise_verdict(1.2, "lower", False, threshold=0.25) == "unchanged"


def test_compare_judges_noise_from_p10_p90() -> None:
    def stats(median: float, p10: float, p90: float) -> dict[str, Any]:
        return {"time_ms": {"unit": "ms", "median": median, "p10": p10, "p90": p90}}

    base = [{"case": {"M": 1}, "metrics": stats(0.17, 0.16, 53.0)}, {"case": {"M": 2}, "metrics": stats(2, 1.9, 2.1)}]
    head = [{"case": {"M": 1}, "metrics": stats(0.04, 0.039, 0.041)}, {"case": {"M": 2}, "metrics": stats(1, 0.9, 1.1)}]
    c = compare(base, head)
    assert [(x.key, x.ratio, x.noisy, x.verdict) for x in c.cases] == [
        ("M=1", 0.04 / 0.17, True, "noisy: not judged"),  # base's band sqrt(53 / 0.16) - 1 = 17.2 > 0.5
        ("M=2", 0.5, False, "improvement"),
    ]
    assert c.improvements == [c.cases[1]] and c.to_dict()["cases"][0]["noisy"] is True


def test_a_measurement_is_noisy_above_twenty_percent_spread() -> None:
    assert relative_spread(0.44, 0.40, 155.0) == pytest.approx((155.0 - 0.40) / 0.44)
    assert is_wide(0.44, 0.40, 155.0) and not is_wide(1.0, 0.95, 1.05)  # 35,000% and 10% against 20%
    assert not is_wide(4.0, 3.5, 4.3) and is_wide(4.0, 3.5, 4.31)  # 20% exactly is not noisy yet, 20.25% is
    assert relative_spread(0.0, 0.0, 1.0) is None and relative_spread(1.0, None, 1.1) is None
    assert relative_spread(1.0, float("nan"), 1.1) is None and relative_spread(True, 0.0, 1.0) is None
    assert wide_sides(1.0, 0.5, 1.5, 1.0, 0.99, 1.01) == ["base"]
    assert wide_sides(1.0, 0.99, 1.01, 2.0, 1.0, 3.0) == ["head"] and wide_sides(1.0, None, None, 1.0, 1, 1) == []


def test_verdict_counts_are_the_verdicts_given() -> None:
    got = verdict_counts(["within noise"] * 5 + ["regression", "improvement"])
    assert got == {"regression": 1, "improvement": 1, "unchanged": 0, "within noise": 5, "noisy: not judged": 0,
                   "too few samples: not judged": 0, "n/a": 0}  # fmt: skip
    assert sum(verdict_counts([]).values()) == 0


def test_percent_unit_is_higher_is_better_whatever_the_name() -> None:
    """A %-unit metric whose name gives no hint (``mfu``, ``occupancy``): its unit alone says higher is better,
    so a drop is a regression and a rise an improvement."""
    assert metric_direction("mfu", "%") == "higher"
    assert metric_direction("occupancy", "%") == "higher"
    assert metric_direction("mfu", "") is None  # the name alone gives no direction: the unit decides

    def r(m: int, mfu: float) -> dict[str, Any]:
        return {"case": {"M": m}, "metrics": {"mfu": {"value": mfu, "unit": "%"}}}

    c = compare([r(1, 60.0), r(2, 60.0)], [r(1, 40.0), r(2, 80.0)])
    assert {x.key: (x.direction, x.verdict) for x in c.cases} == {
        "M=1": ("higher", "regression"),
        "M=2": ("higher", "improvement"),
    }
    assert [x.key for x in c.regressions] == ["M=1"]
