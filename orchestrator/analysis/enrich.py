"""Derived metrics of one result: roofline figures for moe-sweep, % of peak for hbm-bandwidth — pure.

moe-sweep and moe-sweep-ep (case parameters ``M, E, H, I, k, shared, dtype``; agent metrics ``time_ms`` and,
when routing was measured, ``distinct_experts`` = distinct experts whose weights the call read, shared experts
INCLUDED, as the agent's ``moe_gemm`` bench counts them):

============== ======== =====================================================================================
metric         unit     definition
============== ======== =====================================================================================
us_per_token   µs       time_ms · 1000 / M
weight_bytes   B        distinct experts · bytes per expert; the measured ``distinct_experts`` when
                        present, else E·(1 − (1 − k/E)^M) + shared. Bytes per expert: the agent's
                        ``expert_bytes`` metric when present (weights *and scales* as stored: int4 g=32
                        0.5 + 2/32 B per weight, fp8 row-wise 1 + 4/K), else 3·H·I · bytes per weight of
                        the dtype (``roofline.BYTES_PER_WEIGHT``; moe-sweep's ``int4`` is int4-g32)
activation_b.. B        ``roofline.activation_bytes``: input + output + intermediate, a lower bound
gbps           GB/s     weight_bytes / time — weights ONLY, the figure quoted as "TB/s of distinct-expert
                        weight bytes" (REFERENCE: 3.27 TB/s on H200 at the plateau). Activations are reported
                        in bytes but left out of the rate so that the rate is comparable across M and engines.
tflops         TFLOP/s  2·M·(k + shared)·3·H·I / time
gbps_per_gpu   GB/s     gbps / ep, only when the agent's ``ep_gpus`` metric (else the case's ``ep``) is > 1
                        (moe-sweep-ep: experts sharded over ep GPUs; gbps and
                        ``distinct_experts`` are then the sum over the GPUs; pct_peak/pct_roof use this share)
pct_peak       %        gbps / the GPU's datasheet bandwidth · 100 (only when the GPU is known)
pct_roof       %        gbps / the measured copy roof · 100 (only when a roof is given)
============== ======== =====================================================================================

hbm-bandwidth (agent metric ``gbps``): ``pct_peak`` and ``pct_roof`` of it.

Statistics: the time metric's median/p10/p90/min/max are carried into every rate. A rate is inversely
proportional to time, so the time's p10 becomes the rate's p90 (and min becomes max); ``us_per_token`` keeps
the time's order. Raw samples are not copied into derived metrics (they stay on ``time_ms``).

Other suites, or a result lacking a case parameter or ``time_ms``, come back unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from orchestrator.analysis import roofline
from orchestrator.analysis.gpus import GpuSpec
from orchestrator.protocol import Metric

_MOE_KEYS = ("M", "E", "H", "I", "k", "shared", "dtype")
# moe-sweep's dtype names -> roofline's weight formats, where they differ (its int4 has a scale per 32)
_WEIGHT_FORMAT = {"int4": "int4-g32"}


def _scaled(src: Metric, unit: str, f: Callable[[float], float], *, inverse: bool) -> Metric:
    """Apply a monotone ``f`` to a metric and its stats; ``inverse`` when ``f`` decreases (swaps the
    tails)."""

    def g(x: float | None) -> float | None:
        return None if x is None else f(x)

    lo, hi = (src.p90, src.p10) if inverse else (src.p10, src.p90)
    mn, mx = (src.max, src.min) if inverse else (src.min, src.max)
    return Metric(
        value=f(src.value),
        unit=unit,
        median=g(src.median),
        p10=g(lo),
        p90=g(hi),
        min=g(mn),
        max=g(mx),
        n=src.n,
    )


def _const(value: float, unit: str) -> Metric:
    return Metric(value=value, unit=unit)


def _int(case: Mapping[str, Any], name: str) -> int | None:
    v = case.get(name)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _pct(src: Metric, peak: float) -> Metric:
    return _scaled(src, "%", lambda x: roofline.pct_of_peak(x, peak), inverse=False)


def _moe(
    case: Mapping[str, Any], metrics: dict[str, Metric], gpu: GpuSpec | None, roof: float | None
) -> dict[str, Metric]:
    ints = {name: _int(case, name) for name in _MOE_KEYS if name != "dtype"}
    dtype = case.get("dtype")
    time = metrics.get("time_ms")
    if any(v is None for v in ints.values()) or not isinstance(dtype, str) or time is None:
        return metrics
    fmt = _WEIGHT_FORMAT.get(dtype, dtype)
    if time.value <= 0 or fmt not in roofline.BYTES_PER_WEIGHT:
        return metrics
    M, E, H, I, k, shared = (int(ints[n] or 0) for n in ("M", "E", "H", "I", "k", "shared"))  # noqa: E741
    if M < 1 or E < 1 or not 0 <= k <= E:
        return metrics
    measured = metrics.get("distinct_experts")
    if measured is not None:
        experts = measured.value  # already counts the shared experts
    else:
        experts = roofline.expected_distinct_experts(M, E, k) + shared
    per_expert = metrics.get("expert_bytes")
    if per_expert is not None and per_expert.value > 0:
        wbytes = experts * per_expert.value
    else:
        wbytes = roofline.weight_bytes(experts, H, I, fmt)
    abytes = roofline.activation_bytes(M, H, I, k, shared, dtype)
    nflops = roofline.flops(M, k, shared, H, I)
    out = dict(metrics)
    out["us_per_token"] = _scaled(time, "µs", lambda t: t * 1000.0 / M, inverse=False)
    out["weight_bytes"] = _const(wbytes, "B")
    out["activation_bytes"] = _const(abytes, "B")
    out["gbps"] = _scaled(time, "GB/s", lambda t: roofline.achieved_gbps(wbytes, t), inverse=True)
    out["tflops"] = _scaled(time, "TFLOP/s", lambda t: roofline.achieved_tflops(nflops, t), inverse=True)
    gpus = metrics.get("ep_gpus")  # the resolved count (the case may say ep=0, "every GPU")
    ep = int(gpus.value) if gpus is not None else (_int(case, "ep") or 1)
    per_gpu = out["gbps"]
    if ep > 1:  # sharded: gbps is the aggregate of ep GPUs; % of one GPU's peak uses the per-GPU share
        per_gpu = out["gbps_per_gpu"] = _scaled(
            time, "GB/s", lambda t: roofline.achieved_gbps(wbytes, t) / ep, inverse=True
        )
    if gpu is not None:
        out["pct_peak"] = _pct(per_gpu, gpu.mem_bw_gbps)
    if roof is not None:
        out["pct_roof"] = _pct(per_gpu, roof)
    return out


def _hbm(metrics: dict[str, Metric], gpu: GpuSpec | None, roof: float | None) -> dict[str, Metric]:
    gbps = metrics.get("gbps")
    if gbps is None:
        return metrics
    out = dict(metrics)
    if gpu is not None:
        out["pct_peak"] = _pct(gbps, gpu.mem_bw_gbps)
    if roof is not None:
        out["pct_roof"] = _pct(gbps, roof)
    return out


DERIVING_SUITES = frozenset({"moe-sweep", "moe-sweep-ep", "hbm-bandwidth"})
"""The suites whose results get derived metrics here; ``enrich_result`` returns the others' metrics unchanged."""


def enrich_result(
    suite: str,
    case: Mapping[str, Any],
    metrics: dict[str, Metric],
    gpu: GpuSpec | None,
    *,
    measured_roof_gbps: float | None = None,
) -> dict[str, Metric]:
    """``metrics`` plus the derived metrics of ``suite`` (see the module docstring); the input is not mutated.

    ``gpu``: the host's spec (``gpus.match_gpu``), for ``pct_peak``; ``measured_roof_gbps``: the host's
    hbm-bandwidth result in GB/s, for ``pct_roof``. Derived metrics already present in ``metrics`` are
    recomputed, so enriching twice gives the same result.
    """
    roof = measured_roof_gbps if measured_roof_gbps is not None and measured_roof_gbps > 0 else None
    if suite in ("moe-sweep", "moe-sweep-ep"):
        return _moe(case, metrics, gpu, roof)
    if suite == "hbm-bandwidth":
        return _hbm(metrics, gpu, roof)
    return metrics
