"""The projection formula on hand-computed cases (analysis/projection.py)."""

from __future__ import annotations

import pytest

from orchestrator.analysis.projection import Budget, Overheads, Sku, SourcePoint, allreduce_at, check, project

# A point whose ideal times on the source are 1 ms (memory: 4.8e9 B at 4800 GB/s) and 0.5 ms (compute: 5e11 FLOP
# at 1000 TFLOP/s): f_mem = 1 / 1.5 = 2/3; measured 3 ms, i.e. the source runs at half its roofline.
P = SourcePoint(M=8, time_ms=3.0, weight_bytes=4.8e9, flops=5e11)
SRC = Sku("src", 4800.0, "datasheet", 1000.0, "datasheet")


def sku(bw: float, peak: float) -> Sku:
    return Sku("tgt", bw, "test", peak, "test")


def test_same_sku_reproduces_the_input() -> None:
    proj = project([P], SRC, SRC, "bf16", Budget(layers=1, allreduces_per_layer=0, kernels_per_layer=0))
    [r] = proj.rows
    assert r.f_mem == pytest.approx(2 / 3)
    assert r.moe_ms == pytest.approx(3.0) and r.step_ms == pytest.approx(3.0)
    assert r.tokens_per_s == pytest.approx(8 / 3.0 * 1000)


def test_doubling_bandwidth_halves_the_memory_bound_part_only() -> None:
    [r] = project([P], SRC, sku(9600, 1000), "bf16", Budget(layers=1)).rows
    # memory part 3·2/3 = 2 ms -> 1 ms; compute part 1 ms unchanged
    assert r.moe_ms == pytest.approx(1.0 + 1.0)
    [r2] = project([P], SRC, sku(4800, 2000), "bf16", Budget(layers=1)).rows
    assert r2.moe_ms == pytest.approx(2.0 + 0.5)  # doubling the peak halves the compute part only


def test_zero_overhead_budget_is_the_gemm_sum() -> None:
    pts = [P, SourcePoint(M=1, time_ms=0.5, weight_bytes=4.8e8, flops=1e12)]
    proj = project(pts, SRC, sku(8000, 2250), "bf16", Budget(layers=61), overheads=None)
    for r in proj.rows:
        assert r.overhead_ms == 0 and r.overhead_share == 0
        assert r.step_ms == pytest.approx(61 * r.moe_ms)
    assert [r.M for r in proj.rows] == [1, 8]  # ascending M


def test_budget_adds_allreduces_and_kernels_per_layer() -> None:
    over = Overheads(node_us=1.0, allreduce_us={1: 10.0, 8: 20.0, 256: 40.0}, allreduce_mode="graph")
    b = Budget(layers=10, allreduces_per_layer=2, kernels_per_layer=8, overhead_scale=0.5)
    [r] = project([P], SRC, SRC, "bf16", b, over).rows
    assert r.allreduce_us == 20.0 and r.allreduce_note == "measured"
    assert r.overhead_ms == pytest.approx(0.5 * (2 * 20.0 + 8 * 1.0) / 1000)  # 0.024 ms per layer
    assert r.step_ms == pytest.approx(10 * (3.0 + 0.024))
    assert r.overhead_share == pytest.approx(0.24 / 30.24)


def test_allreduce_between_and_beyond_the_measured_sizes() -> None:
    m = {1: 10.0, 8: 20.0, 256: 40.0}
    assert allreduce_at(4, m) == (20.0, "M=8's (next measured)")
    assert allreduce_at(1024, m) == (160.0, "M=256's × 1024/256")
    assert allreduce_at(4, {}) == (0.0, "not measured: 0")


def test_check_reports_the_error_per_common_m() -> None:
    proj = project([P, SourcePoint(M=1, time_ms=1.0, weight_bytes=4.8e9, flops=0)], SRC, SRC, "bf16", Budget())
    rows = check(proj, {8: 2.5, 4096: 9.0})
    assert [(c.M, c.predicted_ms, c.measured_ms) for c in rows] == [(8, pytest.approx(3.0), 2.5)]
    assert rows[0].error_pct == pytest.approx(20.0)


def test_bad_budgets_are_refused() -> None:
    with pytest.raises(ValueError, match="layers must be >= 1"):
        project([P], SRC, SRC, "bf16", Budget(layers=0))
    with pytest.raises(ValueError, match="tensor peaks must be positive"):
        project([P], SRC, sku(4800, 0), "bf16", Budget())
