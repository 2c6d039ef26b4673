"""The multi-process benches on the CPU: allreduce with gloo and 2 processes, the expert-parallel moe_gemm."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from agents.orch_agent.benches import Context, load
from agents.orch_agent.benches._dist import NO_MULTICAST_ENV, RankError, get_pool
from agents.orch_agent.benches.allreduce import (
    _count_wrong,
    _fill,
    bandwidths,
    bus_factor,
    expected_sum,
    world_size_for,
)
from orchestrator.analysis.enrich import enrich_result
from orchestrator.analysis.gpus import match_gpu
from orchestrator.protocol import parse_metric

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def ctx() -> Iterator[Context]:
    """One run's context for the module: the rank pool starts once (seconds) and is closed at the end."""
    c = Context(repeat=4, warmup=1, device="cpu", seed=0)
    yield c
    pool = c.state.get("rank_pool")
    if pool is not None:
        pool.close()


def test_busbw_definition_is_nccl_tests() -> None:
    assert [bus_factor(n) for n in (1, 2, 4, 8)] == [0.0, 1.0, 1.5, 1.75]
    assert bandwidths(10**9, 1e6, 8) == (1.0, 1.75)  # 1 GB in 1 s on 8 ranks
    assert bandwidths(8 * 2**30, 40195.2, 8) == (8 * 2**30 / 1e9 / 0.0401952, 8 * 2**30 / 1e9 / 0.0401952 * 1.75)


@pytest.mark.parametrize("count,n", [(1, 2), (8, 3), (21, 8), (4099, 16)])
def test_fill_sums_to_the_expected_values_and_wrong_counts_differences(count: int, n: int) -> None:
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        total = torch.zeros(count, dtype=dtype)
        for r in range(n):
            buf = torch.empty(count, dtype=dtype)
            _fill(torch, buf, r)
            assert buf[0].item() == 1 + r
            total += buf
        assert [int(x) for x in total[:9].tolist()] == [expected_sum(i, n) for i in range(min(count, 9))]
        assert _count_wrong(torch, total, n) == 0
        total[count // 2] += 1
        total[-1] = -5
        assert _count_wrong(torch, total, n) == (2 if count > 1 else 1)


def test_world_size_is_read_from_the_host() -> None:
    class FakeCuda:
        @staticmethod
        def device_count() -> int:
            return 8

    class FakeTorch:
        cuda = FakeCuda

    assert world_size_for(FakeTorch, "cuda", 0) == 8 and world_size_for(FakeTorch, "cuda", 4) == 4
    assert world_size_for(FakeTorch, "cpu", 0) == 2 and world_size_for(FakeTorch, "cpu", 3) == 3
    with pytest.raises(ValueError, match="world_size=9 but this host has 8 GPU"):
        world_size_for(FakeTorch, "cuda", 9)


@pytest.mark.parametrize(
    "size,dtype",
    [(8, "fp32"), (12, "fp32"), (4100, "fp32"), (1 << 20, "fp32"), (4098, "bf16"), (1 << 16, "fp16")],
)
def test_allreduce_gloo_two_processes_values_and_metrics(ctx: Context, size: int, dtype: str) -> None:
    out = load("allreduce")({"size_bytes": size, "dtype": dtype}, ctx)
    m, info = out["metrics"], out["info"]
    assert m["wrong"] == {"value": 0, "unit": "elements"} and info["wrong_per_rank"] == [0, 0]
    assert info["world_size"] == 2 and info["backend"] == "gloo" and info["world_size_source"] == "cpu default 2"
    esize = 4 if dtype == "fp32" else 2
    assert info["count"] == size // esize and info["size_bytes"] == size // esize * esize
    t = parse_metric("time_us", m["time_us"])
    alg = parse_metric("algbw_gbps", m["algbw_gbps"])
    bus = parse_metric("busbw_gbps", m["busbw_gbps"])
    assert t.unit == "us" and alg.unit == bus.unit == "GB/s" and t.n == 4
    assert t.samples is not None and alg.samples is not None and bus.samples is not None
    for ts, a, b in zip(t.samples, alg.samples, bus.samples, strict=True):
        assert a == pytest.approx(info["size_bytes"] / 1e9 / (ts / 1e6), rel=1e-5, abs=1e-6)
        assert b == a  # 2(n-1)/n = 1 for n = 2
    assert info["env"] == NO_MULTICAST_ENV


def test_ranks_run_with_multicast_off_and_a_failed_rank_is_reported(ctx: Context) -> None:
    pool = get_pool(ctx, 2, "cpu")
    envs = pool.call("agents.orch_agent.benches._dist:environ", {"keys": sorted(NO_MULTICAST_ENV)}, 60)
    assert envs == [NO_MULTICAST_ENV, NO_MULTICAST_ENV]
    with pytest.raises(RankError, match=r"rank [01] failed: AttributeError"):
        pool.call("agents.orch_agent.benches._dist:no_such_function", {}, 60)
    # the broken pool is replaced by the next case
    out = load("allreduce")({"size_bytes": 64}, ctx)
    assert out["metrics"]["wrong"]["value"] == 0 and ctx.state["rank_pool"] is not pool


def test_allreduce_rejects_bad_cases(ctx: Context) -> None:
    with pytest.raises(ValueError, match="size_bytes=1 is less than one fp32 element"):
        load("allreduce")({"size_bytes": 1}, ctx)
    with pytest.raises(ValueError, match="dtype must be one of"):
        load("allreduce")({"size_bytes": 8, "dtype": "int8"}, ctx)


EP_CASE: dict[str, Any] = {"M": 6, "E": 8, "H": 64, "I": 32, "k": 2, "shared": 1, "dtype": "bf16", "seed": 7, "ep": 2}


def test_moe_expert_parallel_two_ranks_check_and_sharding(ctx: Context) -> None:
    from agents.orch_agent.benches.moe_gemm import route

    out = load("moe_gemm")(dict(EP_CASE), ctx)
    m, info = out["metrics"], out["info"]
    assert info["check"]["ok"] is True and info["check"]["tokens"] == 6
    assert m["ep_gpus"] == {"value": 2, "unit": "GPUs"} and info["ep"] == 2
    r = route(torch, 6, 8, 2, 1, 7)
    routed = r["experts"][:, :2]
    ranks = info["ranks"]
    assert [x["experts"] for x in ranks] == [[0, 4], [4, 8]]
    for x in ranks:  # each rank runs the pairs routed to its experts plus the shared expert for 3 of 6 tokens
        lo, hi = x["experts"]
        mine = (routed >= lo) & (routed < hi)
        assert x["pairs"] == int(mine.sum()) + 3
        assert x["distinct"] == len({e for e in routed.flatten().tolist() if lo <= e < hi}) + 1
    assert m["distinct_experts"]["value"] == sum(x["distinct"] for x in ranks)
    assert parse_metric("time_ms", m["time_ms"]).n == 4
    with pytest.raises(ValueError, match="do not split evenly over ep=3"):
        load("moe_gemm")(dict(EP_CASE, ep=3), ctx)


def test_enrich_reports_aggregate_and_per_gpu_bandwidth() -> None:
    case = {"M": 64, "E": 384, "H": 7168, "I": 2048, "k": 8, "shared": 1, "dtype": "bf16", "impl": "auto", "ep": 0}
    metrics = {
        "time_ms": parse_metric("time_ms", {"value": 0.1, "unit": "ms"}),
        "distinct_experts": parse_metric("distinct_experts", {"value": 200, "unit": "experts"}),
        "ep_gpus": parse_metric("ep_gpus", {"value": 8, "unit": "GPUs"}),
    }
    got = enrich_result("moe-sweep-ep", case, metrics, match_gpu("NVIDIA H200"))
    agg = 200 * 3 * 7168 * 2048 * 2 / 1e-4 / 1e9
    assert got["gbps"].value == pytest.approx(agg)
    assert got["gbps_per_gpu"].value == pytest.approx(agg / 8)
    assert got["pct_peak"].value == pytest.approx(agg / 8 / 4800 * 100)
