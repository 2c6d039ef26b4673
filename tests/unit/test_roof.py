"""Efficiency against the measured copy roof (analysis/roof.py), on hand-computed cases.

Its callers: ``Store`` lists results with ``pct_roof``/``roof_note`` (``store/repo.py``), the plot views take
``metric_center`` (``analysis/views.py``), ``orch runs show``'s notes take ``cache_words`` (``cli/render.py``).
"""

from __future__ import annotations

import math

import pytest

from orchestrator.analysis.roof import (
    above_roof_note,
    applies_to,
    cache_words,
    measured_roof_gbps,
    metric_center,
    pct_of_measured_roof,
)

# 2 distinct fp8 experts of a Kimi-K2 layer: 2 · 3·7168·2048 weights · 1 B = 88,080,384 B = 88.1 MB
TWO_FP8_EXPERTS = {"weight_bytes": {"value": 88_080_384.0, "unit": "B"}}


def test_cache_words_by_device() -> None:
    assert cache_words("cpu") == "the CPU's caches"
    assert cache_words("cuda") == "the GPU's cache"
    assert cache_words(None) == "the GPU's cache"


def test_above_roof_note_on_a_gpu_names_the_weights_and_hbm() -> None:
    assert above_roof_note(112.4, TWO_FP8_EXPERTS) == (
        "112% of the copy roof: a cache-resident working set (88.1 MB of weights): the weights stay in "
        "the GPU's cache between calls, so this measures cache, not HBM, bandwidth"
    )


def test_above_roof_note_on_the_cpu_says_dram() -> None:
    assert above_roof_note(250.0, TWO_FP8_EXPERTS, "cpu") == (
        "250% of the copy roof: a cache-resident working set (88.1 MB of weights): the weights stay in "
        "the CPU's caches between calls, so this measures cache, not DRAM, bandwidth"
    )


@pytest.mark.parametrize("metrics", [{}, {"weight_bytes": {"value": 0.0}}, {"weight_bytes": "88 MB"}])
def test_above_roof_note_without_a_weight_size(metrics: dict[str, object]) -> None:
    assert above_roof_note(100.6, metrics) == (
        "101% of the copy roof: a cache-resident working set: the weights stay in "
        "the GPU's cache between calls, so this measures cache, not HBM, bandwidth"
    )


@pytest.mark.parametrize("pct", [None, 100.0, 99.9, 0.0, -5.0, math.nan, math.inf])
def test_no_note_at_or_below_the_roof_or_without_a_finite_figure(pct: float | None) -> None:
    assert above_roof_note(pct, TWO_FP8_EXPERTS) is None


def test_metric_center_prefers_the_median() -> None:
    assert metric_center({"value": 3.0, "median": 2.0}) == 2.0
    assert metric_center({"value": 3.0}) == 3.0
    center = metric_center({"value": 3})
    assert center == 3.0 and type(center) is float  # stored JSON ints come back as floats
    # an unusable median falls back to the value
    for median in (None, True, math.nan, math.inf, "2.0"):
        assert metric_center({"median": median, "value": 4.0}) == 4.0, median


@pytest.mark.parametrize("metric", [None, {}, {"value": None}, {"value": False}, {"value": "3"}, [3.0], 3.0])
def test_metric_center_of_nothing_usable_is_none(metric: object) -> None:
    assert metric_center(metric) is None  # type: ignore[arg-type]


def test_measured_roof_is_the_best_positive_finite_copy() -> None:
    assert measured_roof_gbps([4100.0, None, 4200.5, math.nan, math.inf, -1.0, 0.0]) == 4200.5
    assert measured_roof_gbps([0.5]) == 0.5  # positive, however small
    for nothing in ([], [None], [0.0], [-4200.0], [math.nan], [math.inf]):
        assert measured_roof_gbps(nothing) is None, nothing


def test_pct_of_measured_roof() -> None:
    assert pct_of_measured_roof(2100.0, 4200.0) == 50.0  # 2100 / 4200 · 100
    assert pct_of_measured_roof(4410.0, 4200.0) == pytest.approx(105.0)
    assert pct_of_measured_roof(1.0, 0.5) == 200.0  # a roof below 1 GB/s is still a roof
    for achieved, roof in ((None, 4200.0), (2100.0, None), (2100.0, 0.0), (2100.0, -1.0), (2100.0, math.nan)):
        assert pct_of_measured_roof(achieved, roof) is None, (achieved, roof)
    assert pct_of_measured_roof(math.nan, 4200.0) is None
    assert pct_of_measured_roof(math.inf, 4200.0) is None


def test_only_memory_traffic_suites_are_compared_with_the_copy_roof() -> None:
    assert applies_to("moe-sweep")
    # moe-sweep-ep's gbps is the sum over its GPUs; collectives report bus bandwidth; the roof suite itself
    for suite in ("moe-sweep-ep", "nccl-allreduce", "hbm-bandwidth", ""):
        assert not applies_to(suite), suite


def test_the_weight_size_is_in_megabytes_of_1e6_bytes() -> None:
    # 44,050,020 B = 44.05002 MB -> "44.1"; 20 B fewer than the rounding edge (44,049,980 B) -> "44.0": a MB of
    # anything but 1e6 B (even 1e6 + 1, -0.0001 %) moves it across the edge
    assert above_roof_note(150.0, {"weight_bytes": {"value": 44_050_020.0}}) == (
        "150% of the copy roof: a cache-resident working set (44.1 MB of weights): the weights stay in "
        "the GPU's cache between calls, so this measures cache, not HBM, bandwidth"
    )
    assert "(44.0 MB of weights)" in (above_roof_note(150.0, {"weight_bytes": {"value": 44_049_980.0}}) or "")
