"""Derived metrics of one result (analysis/enrich.py): the rules test_roofline.py's enrich tests leave out.

Hand arithmetic for the Kimi-K2 layer (H = 7168, I = 2048): one expert is 3·H·I = 44,040,192 weights; in bf16
88,080,384 B. M = 1 with top-8 and 1 shared: 9 distinct experts, 792,723,456 B in bf16, and
2·M·(k + shared)·3·H·I = 792,723,456 FLOP.
"""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.analysis.enrich import enrich_result
from orchestrator.analysis.gpus import match_gpu
from orchestrator.protocol import Metric

KIMI_M1: dict[str, Any] = {"M": 1, "E": 384, "H": 7168, "I": 2048, "k": 8, "shared": 1, "dtype": "bf16"}
EXPERT = 44_040_192  # weights per expert, 3·H·I
TIME = Metric(value=0.30, unit="ms", median=0.30, p10=0.25, p90=0.40, min=0.2, max=0.5, n=20)
NINE = Metric(value=9, unit="experts")


def test_tflops_takes_the_time_tails_swapped() -> None:
    t = enrich_result("moe-sweep", KIMI_M1, {"time_ms": TIME, "distinct_experts": NINE}, None)["tflops"]
    # 792,723,456 FLOP / 0.30 ms = 2.64241152 TFLOP/s; the time's p10 (0.25 ms) is the rate's p90, min its max
    assert (t.unit, t.n) == ("TFLOP/s", 20)
    assert t.value == pytest.approx(2.64241152, rel=1e-12) and t.median == pytest.approx(2.64241152, rel=1e-12)
    assert t.p90 == pytest.approx(3.170893824, rel=1e-12)  # / 0.25 ms
    assert t.p10 == pytest.approx(1.98180864, rel=1e-12)  # / 0.40 ms
    assert t.max == pytest.approx(3.96361728, rel=1e-12)  # / 0.2 ms
    assert t.min == pytest.approx(1.585446912, rel=1e-12)  # / 0.5 ms


def test_moe_sweep_int4_is_int4_g32() -> None:
    # moe-sweep's "int4" stores a bf16 scale per 32 weights: 0.5 + 2/32 = 0.5625 B per weight, not 0.5
    case = {**KIMI_M1, "dtype": "int4"}
    out = enrich_result("moe-sweep", case, {"time_ms": TIME, "distinct_experts": NINE}, None)
    assert out["weight_bytes"] == Metric(value=9 * EXPERT * 0.5625, unit="B")  # 222,953,472 B
    assert out["weight_bytes"].value == 222_953_472
    assert out["gbps"].value == pytest.approx(743.17824, rel=1e-12)  # 222,953,472 B / 0.30 ms


def test_fp32_activations_are_four_bytes() -> None:
    # elements 2·M·H + 2·M·(k + shared)·I = 14,336 + 36,864 = 51,200; fp32 4 B each (bf16: 102,400 B)
    out = enrich_result("moe-sweep", {**KIMI_M1, "dtype": "fp32"}, {"time_ms": TIME, "distinct_experts": NINE}, None)
    assert out["activation_bytes"] == Metric(value=204_800, unit="B")
    assert out["weight_bytes"].value == 9 * EXPERT * 4 == 1_585_446_912


def test_the_agents_expert_bytes_are_used_when_positive() -> None:
    metrics = {"time_ms": TIME, "distinct_experts": NINE, "expert_bytes": Metric(value=44_100_000, unit="B")}
    out = enrich_result("moe-sweep", KIMI_M1, metrics, None)
    assert out["weight_bytes"].value == 9 * 44_100_000 == 396_900_000
    one = {**metrics, "expert_bytes": Metric(value=1.0, unit="B")}  # any positive figure is the agent's word
    assert enrich_result("moe-sweep", KIMI_M1, one, None)["weight_bytes"].value == 9
    zero = {**metrics, "expert_bytes": Metric(value=0.0, unit="B")}  # not a figure: 3·H·I · 2 B of bf16
    assert enrich_result("moe-sweep", KIMI_M1, zero, None)["weight_bytes"].value == 9 * 88_080_384


@pytest.mark.parametrize(
    ("change", "experts"),
    [
        ({"E": 1, "k": 1, "shared": 0, "M": 4}, 1),  # one expert, every token on it: E(1 - 0^4) = 1
        ({"k": 0, "shared": 1, "M": 4}, 1),  # shared only: 384(1 - 1^4) + 1 = 1
        ({"k": 384, "shared": 0}, 384),  # every expert: 384(1 - 0^1) = 384
    ],
)
def test_routing_at_its_edges_is_derived(change: dict[str, int], experts: int) -> None:
    out = enrich_result("moe-sweep", {**KIMI_M1, **change}, {"time_ms": TIME}, None)
    assert out["weight_bytes"].value == pytest.approx(experts * 88_080_384, rel=1e-12)


@pytest.mark.parametrize(
    "change",
    [
        {"M": 0},
        {"E": 0, "k": 0},
        {"k": 385},  # more experts per token than there are
        {"k": -1},
        {"M": True},  # a YAML boolean is not a count
        {"M": "1"},
        {"E": 384.0},
        {"H": None},
        {"dtype": 16},
        {"dtype": "int3"},
    ],
)
def test_a_case_it_cannot_derive_from_comes_back_unchanged(change: dict[str, Any]) -> None:
    case = {k: v for k, v in {**KIMI_M1, **change}.items() if v is not None}
    metrics = {"time_ms": TIME, "distinct_experts": NINE}
    assert enrich_result("moe-sweep", case, metrics, None) == metrics


def test_ep_from_the_case_splits_the_rate_per_gpu() -> None:
    h200 = match_gpu("NVIDIA H200")
    metrics = {"time_ms": TIME, "distinct_experts": NINE}
    out = enrich_result("moe-sweep-ep", {**KIMI_M1, "ep": 2}, metrics, h200)
    per = out["gbps_per_gpu"]
    # 792,723,456 B / 0.30 ms = 2642.41152 GB/s over 2 GPUs: 1321.20576 each; tails swapped like gbps
    assert (per.unit, per.n) == ("GB/s", 20)
    assert per.value == pytest.approx(1321.20576, rel=1e-12)
    assert per.p90 == pytest.approx(3170.893824 / 2, rel=1e-12) and per.p10 == pytest.approx(990.90432, rel=1e-12)
    assert per.max == pytest.approx(3963.61728 / 2, rel=1e-12) and per.min == pytest.approx(792.723456, rel=1e-12)
    assert out["pct_peak"].value == pytest.approx(27.52512, rel=1e-12)  # of one H200's 4800 GB/s
    one = enrich_result("moe-sweep-ep", {**KIMI_M1, "ep": 1}, metrics, h200)
    assert "gbps_per_gpu" not in one and one["pct_peak"].value == pytest.approx(55.05024, rel=1e-12)


def test_hbm_bandwidth_against_the_measured_roof() -> None:
    gbps = Metric(value=4200.0, unit="GB/s", median=4200.0, p10=4100.0, p90=4260.0)
    out = enrich_result("hbm-bandwidth", {}, {"gbps": gbps}, None, measured_roof_gbps=4200.0)
    assert out == {
        "gbps": gbps,
        "pct_roof": Metric(value=100.0, unit="%", median=100.0, p10=4100 / 42, p90=4260 / 42),
    }
    # a roof below 1 GB/s is still a roof: 4200 / 0.5 · 100
    assert enrich_result("hbm-bandwidth", {}, {"gbps": gbps}, None, measured_roof_gbps=0.5)["pct_roof"].value == (
        840_000.0
    )


@pytest.mark.parametrize("roof", [None, 0.0, -4200.0])
def test_no_positive_roof_no_pct_roof(roof: float | None) -> None:
    gbps = Metric(value=4200.0, unit="GB/s")
    assert enrich_result("hbm-bandwidth", {}, {"gbps": gbps}, None, measured_roof_gbps=roof) == {"gbps": gbps}
    out = enrich_result("moe-sweep", KIMI_M1, {"time_ms": TIME}, None, measured_roof_gbps=roof)
    assert "pct_roof" not in out and "gbps" in out
