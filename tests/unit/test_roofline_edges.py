"""roofline: the input checks at their boundaries and their messages — the survivors of
scripts/mutation.sh orchestrator/analysis/roofline.py."""

from __future__ import annotations

import pytest

from orchestrator.analysis.roofline import (
    achieved_gbps,
    achieved_tflops,
    bytes_per_weight,
    expected_distinct_experts,
    pct_of_peak,
)


def _message(fn: object, *args: object) -> str:
    with pytest.raises(ValueError) as exc:
        fn(*args)  # type: ignore[operator]
    return str(exc.value)


def test_time_and_peak_must_be_positive_and_say_so() -> None:
    assert _message(achieved_gbps, 1e9, 0) == "time must be positive, got 0 ms"
    assert _message(achieved_tflops, 1e12, 0.0) == "time must be positive, got 0.0 ms"
    assert _message(achieved_tflops, 1e12, -1) == "time must be positive, got -1 ms"
    assert _message(pct_of_peak, 1.0, 0) == "peak must be positive, got 0"
    assert pct_of_peak(0.25, 0.5) == 50.0  # a peak below 1 (e.g. TB/s) is a peak
    assert achieved_tflops(2e12, 1000.0) == 2.0


def test_distinct_experts_edges() -> None:
    assert expected_distinct_experts(4, 1, 1) == 1.0  # one expert, always chosen
    assert expected_distinct_experts(4, 8, 0) == 0.0  # top-0: nothing routed
    assert _message(expected_distinct_experts, 1, 0, 0) == "need M >= 0, E >= 1 and 0 <= k <= E; got M=1, E=0, k=0"


def test_unknown_dtype_names_the_known_ones() -> None:
    from orchestrator.analysis.roofline import BYTES_PER_WEIGHT

    assert _message(bytes_per_weight, "fp3") == f"unknown weight dtype 'fp3'; known: {', '.join(BYTES_PER_WEIGHT)}"
    assert ", ".join(BYTES_PER_WEIGHT).startswith("bf16, fp16, fp32, fp8, ")
