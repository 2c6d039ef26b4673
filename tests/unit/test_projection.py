"""The projection formula on hand-computed cases (analysis/projection.py)."""

from __future__ import annotations

import json

import pytest

from orchestrator.analysis.projection import (
    FORMULA,
    Budget,
    Overheads,
    Sku,
    SourcePoint,
    allreduce_at,
    check,
    moe_time,
    project,
)

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


# --- what mutation testing found unchecked (docs/testing.md, "projection.py (session 5)") ---


def test_compute_bound_point_keeps_its_compute_share_exactly() -> None:
    # t_mem = 4.8e9 B / 4800e9 B/s = 1 ms; t_cmp = 9e12 FLOP / 1000e12 FLOP/s = 9 ms: f_mem = 1 / 10. Exact to
    # float precision: GB/s is 1e9 B/s and TFLOP/s 1e12 FLOP/s (a 1e9 + 1 moves f_mem by ~1e-9, 1e12 + 1 by ~1e-12)
    q = SourcePoint(M=4, time_ms=10.0, weight_bytes=4.8e9, flops=9e12)
    moe_ms, f_mem = moe_time(q, SRC, sku(9600, 1000))
    assert f_mem == pytest.approx(0.1, rel=1e-13, abs=0)
    assert moe_ms == pytest.approx(10 * 0.1 * 0.5 + 10 * 0.9 * 1.0, rel=1e-13, abs=0)  # 0.5 + 9 = 9.5 ms


def test_no_ideal_time_counts_the_point_as_memory_bound() -> None:
    # no bytes and no FLOPs: f_mem = 1 (not a division by zero); doubling the bandwidth halves 3 ms -> 1.5 ms
    z = SourcePoint(M=2, time_ms=3.0, weight_bytes=0.0, flops=0.0)
    assert moe_time(z, SRC, sku(9600, 500)) == (1.5, 1.0)


def test_every_non_positive_input_is_refused_and_small_positive_ones_are_not() -> None:
    bad_bw = "M=8: time and bandwidths must be positive"
    bad_peak = "M=8: tensor peaks must be positive"
    cases = [
        (SourcePoint(M=8, time_ms=0.0, weight_bytes=4.8e9, flops=5e11), SRC, SRC, bad_bw),
        (P, sku(0, 1000), SRC, bad_bw),
        (P, SRC, sku(0, 1000), bad_bw),
        (P, sku(4800, 0), SRC, bad_peak),
        (P, SRC, sku(4800, 0), bad_peak),
    ]
    for point, source, target, message in cases:
        with pytest.raises(ValueError) as exc:
            moe_time(point, source, target)
        assert str(exc.value) == message
    tiny = sku(0.5, 0.5)  # below 1 but positive: a figure, not an error; same SKU both sides gives t back
    assert moe_time(P, tiny, tiny)[0] == pytest.approx(3.0)


def test_budget_bounds_and_messages() -> None:
    bad_budget = "layers must be >= 1; all-reduces and kernels per layer >= 0"
    for budget in (Budget(layers=0), Budget(allreduces_per_layer=-1), Budget(kernels_per_layer=-1)):
        with pytest.raises(ValueError) as exc:
            project([P], SRC, SRC, "bf16", budget)
        assert str(exc.value) == bad_budget
    with pytest.raises(ValueError) as exc:
        project([P], SRC, SRC, "bf16", Budget(overhead_scale=-0.5))
    assert str(exc.value) == "the overhead scale must be >= 0"
    over = Overheads(node_us=1.0, allreduce_us={8: 20.0}, allreduce_mode="graph")
    [r] = project([P], SRC, SRC, "bf16", Budget(layers=2, overhead_scale=0.0), over).rows
    assert (r.overhead_ms, r.step_ms, r.overhead_share) == (0.0, 6.0, 0.0)  # a scale of 0 drops the budget


def test_projection_carries_its_inputs_and_formula() -> None:
    target = sku(8000, 2250)
    budget = Budget(layers=1)
    proj = project([P], SRC, target, "fp8", budget)
    assert (proj.source, proj.target, proj.dtype, proj.budget, proj.overheads) == (SRC, target, "fp8", budget, None)
    assert proj.formula == FORMULA and proj.formula.startswith("t_mem = B/BW_src; t_cmp = F/P_src;")
    [r] = proj.rows
    assert (r.M, r.source_ms, r.allreduce_us, r.allreduce_note) == (8, 3.0, 0.0, "no overheads run: 0")
    over = Overheads(node_us=1.0, allreduce_us={8: 20.0}, allreduce_mode="eager", run_id="r1")
    assert project([P], SRC, target, "fp8", budget, over).overheads is over


def test_as_dict_is_json_with_string_keys() -> None:
    over = Overheads(node_us=1.0, allreduce_us={1: 10.0, 256: 40.0}, allreduce_mode="graph", run_id="r1")
    budget = Budget(layers=1, allreduces_per_layer=0, kernels_per_layer=0)
    d = project([P], SRC, SRC, "bf16", budget, over).as_dict()
    assert d["overheads"] == {
        "node_us": 1.0,
        "allreduce_us": {"1": 10.0, "256": 40.0},  # JSON object keys are strings
        "allreduce_mode": "graph",
        "run_id": "r1",
    }
    assert d["source"] == {
        "key": "src",
        "bw_gbps": 4800.0,
        "bw_source": "datasheet",
        "peak_tflops": 1000.0,
        "peak_source": "datasheet",
    }
    assert (d["dtype"], d["formula"], d["budget"]["layers"], d["rows"][0]["M"]) == ("bf16", FORMULA, 1, 8)
    assert json.loads(json.dumps(d)) == d
    assert over.allreduce_us == {1: 10.0, 256: 40.0}  # the input is not rewritten
    plain = project([P], SRC, SRC, "bf16", budget).as_dict()
    assert plain["overheads"] is None and plain["rows"][0]["allreduce_note"] == "no overheads run: 0"


def test_check_skips_a_zero_measurement_and_keeps_one_below_a_millisecond() -> None:
    proj = project([P], SRC, SRC, "bf16", Budget())
    assert check(proj, {8: 0.0}) == []
    [c] = check(proj, {8: 0.5})
    assert (c.M, c.measured_ms) == (8, 0.5)
    assert c.error_pct == pytest.approx((3.0 - 0.5) / 0.5 * 100)  # 500 %
