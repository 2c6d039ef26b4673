"""The torch benches on the CPU with tiny shapes: numerics, routing counts, metric shapes."""

from __future__ import annotations

from typing import Any

import pytest

from agents.orch_agent.benches import Context, load
from orchestrator.protocol import parse_metric

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

TINY = {"M": 6, "E": 8, "H": 64, "I": 32, "k": 2, "shared": 1, "dtype": "bf16", "seed": 7}


def ctx(**kw: Any) -> Context:
    return Context(**{"repeat": 3, "warmup": 1, "device": "cpu", "seed": 0, **kw})


def test_moe_gemm_cpu_checks_numerics_and_counts_experts() -> None:
    from agents.orch_agent.benches.moe_gemm import route

    c = ctx()
    out = load("moe_gemm")(dict(TINY), c)
    info, metrics = out["info"], out["metrics"]
    assert info["check"]["ok"] is True and info["check"]["max_rel_err"] < 3e-2
    assert info["device"] == "cpu" and info["routing_in_timed_region"] is False and info["dtype"] == "bf16"
    assert info["impl"] in ("grouped_mm", "loop")
    # distinct experts measured from the routing: routed experts touched + the shared one
    r = route(torch, 6, 8, 2, 1, 7)
    expected = len({e for row in r["experts"][:, :2].tolist() for e in row}) + 1
    assert metrics["distinct_experts"] == {"value": expected, "unit": "experts"}
    assert 3 <= expected <= 9
    t = parse_metric("time_ms", metrics["time_ms"])
    assert t.unit == "ms" and t.n == 3 and t.samples is not None and len(t.samples) == 3
    # the check runs once per run; weights are reused by the next case of the same shape
    weights = c.state["moe_weights"]["sets"][0]["w13"]
    again = load("moe_gemm")(dict(TINY, M=1), c)
    assert "check" not in again["info"] and c.state["moe_weights"]["sets"][0]["w13"] is weights
    assert again["metrics"]["distinct_experts"]["value"] == 3  # M=1: k routed + 1 shared


def test_route_is_uniform_top_k_with_shared_last() -> None:
    from agents.orch_agent.benches.moe_gemm import route

    r = route(torch, 512, 16, 4, 2, seed=1)
    ex = r["experts"]
    assert ex.shape == (512, 6) and (ex[:, 4:] == torch.tensor([16, 17])).all()
    assert all(len(set(row)) == 6 for row in ex.tolist())  # no expert twice for a token
    assert r["counts"].tolist()[16:] == [512, 512] and int(r["counts"].sum()) == 512 * 6
    assert torch.allclose(r["weights"][:, :4].sum(1), torch.ones(512))
    assert r["distinct"] == 16 + 2
    assert torch.equal(route(torch, 512, 16, 4, 2, seed=1)["experts"], ex)  # seeded


@pytest.mark.parametrize("impl,dtype", [("loop", "bf16"), ("loop", "fp32"), ("auto", "fp16")])
def test_moe_gemm_other_impls_and_dtypes_pass_the_check(impl: str, dtype: str) -> None:
    out = load("moe_gemm")(dict(TINY, impl=impl, dtype=dtype), ctx())
    assert out["info"]["check"]["ok"] is True and out["info"]["impl"] == "loop"
    if impl == "auto":
        assert "bf16 only" in out["info"]["impl_note"]


def test_moe_gemm_rejects_bad_params() -> None:
    with pytest.raises(ValueError, match="'M'"):
        load("moe_gemm")(dict(TINY, M=0), ctx())
    with pytest.raises(ValueError, match="k=9 exceeds E=8"):
        load("moe_gemm")(dict(TINY, k=9), ctx())
    with pytest.raises(RuntimeError, match="grouped_mm supports bf16 only"):
        load("moe_gemm")(dict(TINY, impl="grouped_mm", dtype="fp32"), ctx())


def test_moe_gemm_cuda_requested_without_cuda_fails_clearly() -> None:
    if torch.cuda.is_available():
        pytest.skip("this host has CUDA")
    with pytest.raises(RuntimeError, match="device 'cuda' requested"):
        load("moe_gemm")(dict(TINY), ctx(device="cuda"))


def test_hbm_cpu_small_buffer() -> None:
    out = load("hbm")({"size_bytes": 1 << 22}, ctx(repeat=5))
    gbps, t = parse_metric("gbps", out["metrics"]["gbps"]), parse_metric("time_ms", out["metrics"]["time_ms"])
    assert gbps.unit == "GB/s" and t.unit == "ms" and gbps.n == t.n == 5
    # An odd count: the median GB/s is the one of the median time, however a loaded machine scatters them.
    assert gbps.value == pytest.approx(2 * (1 << 22) / (t.value / 1e3) / 1e9, rel=1e-2)  # both rounded
    assert out["info"]["device"] == "cpu" and out["info"]["size_bytes"] == 1 << 22
    with pytest.raises(ValueError, match="size_bytes"):
        load("hbm")({"size_bytes": -1}, ctx())
