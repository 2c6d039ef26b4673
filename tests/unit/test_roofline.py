"""Roofline arithmetic and enrichment against hand-computed values (issue 4: kimi-k2, 384+1 experts)."""

from __future__ import annotations

import pytest

from orchestrator.analysis import roofline as rl
from orchestrator.analysis.enrich import enrich_result
from orchestrator.analysis.gpus import match_gpu
from orchestrator.protocol import Metric

H, I, E, K, SHARED = 7168, 2048, 384, 8, 1  # noqa: E741


def test_expert_weights_kimi_k2() -> None:
    assert rl.expert_weights(H, I) == 44_040_192  # 3 * 7168 * 2048


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("bf16", 2.0),
        ("fp16", 2.0),
        ("fp32", 4.0),
        ("fp8", 1.000244140625),  # 1 + 4/16384
        ("int4-g32", 0.5625),
        ("int4-g128", 0.515625),
        ("mxfp4", 0.53125),
        ("nvfp4", 0.5625),
        ("int4", 0.5),
    ],
)
def test_bytes_per_weight(name: str, expected: float) -> None:
    assert rl.BYTES_PER_WEIGHT[name] == expected
    assert rl.bytes_per_weight(name) == expected


def test_bytes_per_weight_rejects_unknown_and_nonpositive() -> None:
    with pytest.raises(ValueError, match="unknown weight dtype 'int3'.*bf16"):
        rl.bytes_per_weight("int3")
    with pytest.raises(ValueError, match="positive"):
        rl.bytes_per_weight(0.0)
    assert rl.bytes_per_weight(0.75) == 0.75


def test_expected_distinct_experts() -> None:
    assert rl.expected_distinct_experts(0, E, K) == 0.0
    assert rl.expected_distinct_experts(1, E, K) == pytest.approx(8.0, rel=1e-12)
    # two tokens: 384 * (1 - (376/384)^2) = 15.8333...
    assert rl.expected_distinct_experts(2, E, K) == pytest.approx(384 * (1 - (376 / 384) ** 2), rel=1e-15)
    assert rl.expected_distinct_experts(2, E, K) == pytest.approx(15.833333333333, rel=1e-12)
    assert rl.expected_distinct_experts(4096, E, K) == 384.0
    assert rl.expected_distinct_experts(5, 4, 4) == 4.0  # k == E: every expert from the first token


@pytest.mark.parametrize(("M", "E_", "k"), [(-1, 4, 1), (1, 0, 0), (1, 4, 5), (1, 4, -1)])
def test_expected_distinct_experts_rejects(M: int, E_: int, k: int) -> None:
    with pytest.raises(ValueError, match="need M >= 0"):
        rl.expected_distinct_experts(M, E_, k)


def test_kimi_k2_m1_bf16_weights_and_flops() -> None:
    # 8 routed + 1 shared = 9 experts * 44,040,192 weights * 2 B
    assert rl.weight_bytes(K + SHARED, H, I, "bf16") == 792_723_456
    assert rl.flops(1, K, SHARED, H, I) == 792_723_456  # 792.7 MFLOP per token
    expected = rl.expected_distinct_experts(1, E, K) + SHARED
    assert rl.weight_bytes(expected, H, I, "bf16") == pytest.approx(792_723_456, rel=1e-12)


def test_kimi_k2_m4096_all_385_experts() -> None:
    d = rl.expected_distinct_experts(4096, E, K) + SHARED
    assert d == 385.0
    assert rl.weight_bytes(d, H, I, "bf16") == 33_910_947_840  # 33.9 GB
    assert rl.flops(4096, K, SHARED, H, I) == 4096 * 792_723_456


def test_kimi_k2_int4_half_byte_figures() -> None:
    # the figures quoted for the model's INT4 weights, scales aside
    assert rl.weight_bytes(9, H, I, 0.5) == 198_180_864  # 198 MB at M=1
    assert rl.weight_bytes(384, H, I, "int4") == 8_455_716_864  # 8.46 GB, all routed experts
    assert rl.weight_bytes(384, H, I, "int4-g32") == 9_512_681_472  # with bf16 scales per 32


def test_activation_bytes() -> None:
    # (2*M*H + 2*M*(k+shared)*I) elements
    assert rl.activation_bytes(1, H, I, K, SHARED, "bf16") == (2 * 7168 + 2 * 9 * 2048) * 2 == 102_400
    assert rl.activation_bytes(4, 256, 128, 4, 1, "fp32") == (2 * 4 * 256 + 2 * 4 * 5 * 128) * 4 == 28_672
    assert rl.activation_bytes(1, H, I, K, SHARED, "fp8") == 102_400  # 16-bit activations with fp8 weights


def test_rates() -> None:
    assert rl.achieved_gbps(1e9, 1.0) == 1000.0  # 1 GB in 1 ms = 1000 GB/s
    assert rl.achieved_tflops(792_723_456, 1.0) == pytest.approx(0.792723456, rel=1e-15)
    # reference: kimi-k2 routed experts only at the H200 plateau, ~10.35 ms -> ~3.27 TB/s, 68% of 4.8 TB/s
    routed = rl.weight_bytes(384, H, I, "bf16")
    assert routed == 33_822_867_456
    gbps = rl.achieved_gbps(routed, 10.35)
    assert gbps == pytest.approx(3267.9098, rel=1e-7)
    assert rl.pct_of_peak(gbps, 4800) == pytest.approx(68.081454, rel=1e-7)
    with pytest.raises(ValueError):
        rl.achieved_gbps(1.0, 0.0)
    with pytest.raises(ValueError):
        rl.achieved_tflops(1.0, -1.0)
    with pytest.raises(ValueError):
        rl.pct_of_peak(1.0, 0.0)


# --- enrich_result: the derived metrics of one stored result ---

KIMI_M1 = {"M": 1, "E": 384, "H": 7168, "I": 2048, "k": 8, "shared": 1, "dtype": "bf16", "impl": "auto"}
TIME = Metric(
    value=0.30, unit="ms", median=0.30, p10=0.25, p90=0.40, min=0.2, max=0.5, n=20, samples=[0.3] * 20
)


def test_enrich_moe_sweep_m1_measured_experts() -> None:
    h200 = match_gpu("NVIDIA H200")
    # the agent counts distinct experts with the shared one: 8 routed + 1 shared
    metrics = {"time_ms": TIME, "distinct_experts": Metric(value=9, unit="experts")}
    out = enrich_result("moe-sweep", KIMI_M1, metrics, h200)
    assert set(out) == {
        "time_ms", "distinct_experts", "us_per_token", "weight_bytes", "activation_bytes", "gbps", "tflops",
        "pct_peak",
    }  # fmt: skip
    assert metrics == {"time_ms": TIME, "distinct_experts": Metric(value=9, unit="experts")}  # not mutated
    assert out["weight_bytes"] == Metric(value=792_723_456, unit="B")
    assert out["activation_bytes"] == Metric(value=102_400, unit="B")
    us = out["us_per_token"]
    stats = (us.unit, us.value, us.p10, us.p90, us.min, us.max, us.n)
    assert stats == ("µs", 300.0, 250.0, 400.0, 200.0, 500.0, 20)
    g = out["gbps"]
    assert g.unit == "GB/s"
    assert g.value == pytest.approx(2642.41152, rel=1e-12)  # 792,723,456 B / 0.30 ms
    assert g.median == pytest.approx(2642.41152, rel=1e-12)
    assert g.p90 == pytest.approx(3170.893824, rel=1e-12)  # from the time's p10 (0.25 ms)
    assert g.p10 == pytest.approx(1981.80864, rel=1e-12)  # from the time's p90 (0.40 ms)
    assert g.max == pytest.approx(3963.61728, rel=1e-12) and g.min == pytest.approx(1585.446912, rel=1e-12)
    assert g.samples is None
    t = out["tflops"]
    assert (t.unit, t.value) == ("TFLOP/s", pytest.approx(2.64241152, rel=1e-12))
    p = out["pct_peak"]
    assert (p.unit, p.value) == ("%", pytest.approx(55.0502400, rel=1e-12))  # of H200's 4800 GB/s
    assert p.p90 == pytest.approx(66.06028800, rel=1e-12)


def test_enrich_moe_sweep_expected_experts_and_reference_plateau() -> None:
    # no measured count: E(1-(1-k/E)^M); the issue-5 reference (no shared expert, 10.35 ms at M=4096)
    case = {**KIMI_M1, "M": 4096, "shared": 0}
    out = enrich_result(
        "moe-sweep", case, {"time_ms": Metric(value=10.35, unit="ms")}, match_gpu("NVIDIA H200")
    )
    assert out["weight_bytes"].value == 33_822_867_456
    assert out["gbps"].value == pytest.approx(3267.9098, rel=1e-7)
    assert out["gbps"].p10 is None
    assert out["pct_peak"].value == pytest.approx(68.081454, rel=1e-7)
    assert out["us_per_token"].value == pytest.approx(10.35 * 1000 / 4096, rel=1e-15)


def test_enrich_moe_sweep_without_gpu_and_with_roof() -> None:
    out = enrich_result("moe-sweep", KIMI_M1, {"time_ms": TIME}, None)
    assert "pct_peak" not in out and "pct_roof" not in out
    # expected 8 routed (E(1-(1-k/E)^1) = k) + 1 shared
    assert out["weight_bytes"].value == pytest.approx(792_723_456, rel=1e-12)
    out = enrich_result("moe-sweep", KIMI_M1, {"time_ms": TIME}, None, measured_roof_gbps=4200.0)
    assert out["pct_roof"].value == pytest.approx(62.91456, rel=1e-12)  # of a 4200 GB/s roof


def test_enrich_leaves_incomplete_or_unknown_alone() -> None:
    metrics = {"time_ms": TIME}
    assert enrich_result("noop", {"ms": 1.0}, metrics, None) == metrics
    no_dtype = {k: v for k, v in KIMI_M1.items() if k != "dtype"}
    assert enrich_result("moe-sweep", no_dtype, metrics, None) == metrics
    assert enrich_result("moe-sweep", KIMI_M1, {"other": TIME}, None) == {"other": TIME}
    zero = {"time_ms": Metric(value=0.0, unit="ms")}
    assert enrich_result("moe-sweep", KIMI_M1, zero, None) == zero


def test_enrich_hbm_bandwidth() -> None:
    gbps = Metric(value=4200.0, unit="GB/s", median=4200.0, p10=4100.0, p90=4260.0)
    out = enrich_result("hbm-bandwidth", {"size_bytes": 4 * 2**30}, {"gbps": gbps}, match_gpu("NVIDIA H200"))
    assert out["gbps"] is gbps
    assert out["pct_peak"] == Metric(value=87.5, unit="%", median=87.5, p10=4100 / 48, p90=4260 / 48)
    assert "pct_peak" not in enrich_result("hbm-bandwidth", {}, {"gbps": gbps}, None)


def test_enrich_measured_count_differs_from_expected() -> None:
    # a seed that touched 300 of the 384 routed experts at M=64: weight bytes follow the measurement
    case = {**KIMI_M1, "M": 64}
    metrics = {"time_ms": Metric(value=8.0, unit="ms"), "distinct_experts": Metric(value=301, unit="experts")}
    out = enrich_result("moe-sweep", case, metrics, None)
    assert out["weight_bytes"].value == 301 * 44_040_192 * 2 == 26_512_195_584
    assert out["tflops"].value == pytest.approx(64 * 792_723_456 / 8e-3 / 1e12, rel=1e-12)
