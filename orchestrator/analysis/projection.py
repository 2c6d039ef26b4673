"""Project a measured MoE sweep from one GPU SKU to another, with a per-step budget of fixed costs — pure.

Inputs per batch size M (from a stored moe-sweep run on the *source* GPU): the measured time ``t`` (ms, median),
the weight bytes the call streamed ``B`` (distinct experts × bytes per expert, scales included) and its FLOPs
``F`` = 2·M·(k + shared)·3·H·I. Per SKU: the memory bandwidth ``BW`` (GB/s: the datasheet figure, or with
``roof=measured`` each host's measured copy roof) and the dense tensor peak ``P`` of the weight format (TFLOP/s,
``GpuSpec.dense_peak_tflops``: bf16 for bf16 and int4 W4A16, fp8 for fp8).

The GEMM time is split into a memory-bound and a compute-bound part in proportion to the two ideal times on the
source, and each part is scaled by its own ratio — the source's measured efficiency is kept::

    t_mem = B / BW_src                      t_cmp = F / P_src                 (ideal times on the source)
    f_mem = t_mem / (t_mem + t_cmp)         share of the measured time that is memory-bound
    t_moe' = t · f_mem · BW_src / BW_tgt  +  t · (1 − f_mem) · P_src / P_tgt

So projecting onto the same SKU reproduces ``t``, and doubling the bandwidth halves ``t · f_mem`` only.

The per-step budget (decode, one token per sequence per step)::

    overhead(M) = s · (n_ar · allreduce(M) + n_k · node)        per layer, ms
    step(M)     = layers · (t_moe'(M) + overhead(M))            ms
    tokens/s    = M / step · 1000       overhead share = layers · overhead(M) / step

``allreduce(M)`` is the overheads run's ``allreduce_<mode>_M<M>_us`` (message M·H·2 bytes; for an M above the
largest measured one, the largest scaled by M / M_max, i.e. bandwidth-bound; for an M between two measured ones,
the next larger one), ``node`` its ``graph_node_us`` (the per-kernel cost inside a CUDA graph), ``n_ar``
all-reduces and ``n_k`` kernels per layer, ``s`` the scale applied to the source's fixed costs on the target
(1 = kept as measured). Without an overheads run the budget is zero and ``step`` is ``layers`` times the GEMM
time. Everything else a decode step does (attention, the dense layers, sampling) is *not* in ``step``: it is a
MoE-layer budget, not a full model.

``check``: predicted ``t_moe'`` against a measured run on the target, error % = (predicted − measured) /
measured · 100 per M present in both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

KERNELS_PER_LAYER = 8
"""Default ``n_k``: the kernels of orch's own moe_gemm layer call inside its CUDA graph (gather, gate/up GEMM,
SiLU, multiply, down GEMM, un-permute, combine matmul, output copy)."""
ALLREDUCES_PER_LAYER = 2
"""Default ``n_ar``: tensor parallelism's two all-reduces per transformer layer (after attention, after the
MLP/MoE; Megatron-LM, Shoeybi et al. 2019, section 3)."""


@dataclass(frozen=True)
class SourcePoint:
    """One measured M of the source sweep: ``time_ms`` (median), ``weight_bytes`` (B), ``flops``."""

    M: int
    time_ms: float
    weight_bytes: float
    flops: float


@dataclass(frozen=True)
class Sku:
    """What the projection uses of one SKU: its key, bandwidth (GB/s) and the dense peak for the dtype."""

    key: str
    bw_gbps: float
    bw_source: str
    peak_tflops: float
    peak_source: str


@dataclass(frozen=True)
class Overheads:
    """Fixed costs from an overheads run, µs: per-node graph cost and all-reduce latency by M."""

    node_us: float
    allreduce_us: Mapping[int, float]
    allreduce_mode: str
    run_id: str | None = None


@dataclass(frozen=True)
class Budget:
    layers: int = 61
    allreduces_per_layer: int = ALLREDUCES_PER_LAYER
    kernels_per_layer: int = KERNELS_PER_LAYER
    overhead_scale: float = 1.0


@dataclass(frozen=True)
class Row:
    M: int
    source_ms: float
    f_mem: float
    moe_ms: float
    allreduce_us: float
    allreduce_note: str
    overhead_ms: float
    step_ms: float
    tokens_per_s: float
    overhead_share: float


@dataclass(frozen=True)
class CheckRow:
    M: int
    predicted_ms: float
    measured_ms: float
    error_pct: float


@dataclass(frozen=True)
class Projection:
    source: Sku
    target: Sku
    dtype: str
    budget: Budget
    overheads: Overheads | None
    rows: list[Row]
    formula: str = field(default="")

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.overheads is not None:
            d["overheads"]["allreduce_us"] = {str(k): v for k, v in self.overheads.allreduce_us.items()}
        return d


FORMULA = (
    "t_mem = B/BW_src; t_cmp = F/P_src; f_mem = t_mem/(t_mem+t_cmp); "
    "t_moe' = t·f_mem·BW_src/BW_tgt + t·(1−f_mem)·P_src/P_tgt; "
    "overhead = s·(n_ar·allreduce(M) + n_k·node); step = layers·(t_moe' + overhead); "
    "tokens/s = M/step; overhead share = layers·overhead/step"
)


def allreduce_at(M: int, measured: Mapping[int, float]) -> tuple[float, str]:
    """All-reduce µs for M tokens from the measured points, and how it was obtained (see the module doc)."""
    if not measured:
        return 0.0, "not measured: 0"
    if M in measured:
        return measured[M], "measured"
    larger = [m for m in measured if m > M]
    if larger:
        m = min(larger)
        return measured[m], f"M={m}'s (next measured)"
    top = max(measured)
    return measured[top] * M / top, f"M={top}'s × {M}/{top}"


def moe_time(point: SourcePoint, source: Sku, target: Sku) -> tuple[float, float]:
    """(t_moe' in ms, f_mem) for one point. Raises ValueError on a non-positive input."""
    if point.time_ms <= 0 or source.bw_gbps <= 0 or target.bw_gbps <= 0:
        raise ValueError(f"M={point.M}: time and bandwidths must be positive")
    if source.peak_tflops <= 0 or target.peak_tflops <= 0:
        raise ValueError(f"M={point.M}: tensor peaks must be positive")
    t_mem = point.weight_bytes / (source.bw_gbps * 1e9)
    t_cmp = point.flops / (source.peak_tflops * 1e12)
    f_mem = t_mem / (t_mem + t_cmp) if t_mem + t_cmp > 0 else 1.0
    t = point.time_ms
    return (
        t * f_mem * source.bw_gbps / target.bw_gbps + t * (1 - f_mem) * source.peak_tflops / target.peak_tflops,
        f_mem,
    )


def project(
    points: Sequence[SourcePoint],
    source: Sku,
    target: Sku,
    dtype: str,
    budget: Budget,
    overheads: Overheads | None = None,
) -> Projection:
    """The projection of every point (ascending M). Raises ValueError on bad inputs (layers < 1, ...)."""
    if budget.layers < 1 or budget.allreduces_per_layer < 0 or budget.kernels_per_layer < 0:
        raise ValueError("layers must be >= 1; all-reduces and kernels per layer >= 0")
    if budget.overhead_scale < 0:
        raise ValueError("the overhead scale must be >= 0")
    rows = []
    for p in sorted(points, key=lambda p: p.M):
        moe_ms, f_mem = moe_time(p, source, target)
        if overheads is not None:
            ar_us, note = allreduce_at(p.M, overheads.allreduce_us)
            node_us = overheads.node_us
        else:
            ar_us, note, node_us = 0.0, "no overheads run: 0", 0.0
        over_ms = (
            budget.overhead_scale
            * (budget.allreduces_per_layer * ar_us + budget.kernels_per_layer * node_us)
            / 1000.0
        )
        step = budget.layers * (moe_ms + over_ms)
        rows.append(
            Row(
                M=p.M,
                source_ms=p.time_ms,
                f_mem=f_mem,
                moe_ms=moe_ms,
                allreduce_us=ar_us,
                allreduce_note=note,
                overhead_ms=over_ms,
                step_ms=step,
                tokens_per_s=p.M / step * 1000.0,
                overhead_share=budget.layers * over_ms / step,
            )
        )
    return Projection(source, target, dtype, budget, overheads, rows, FORMULA)


def check(projection: Projection, measured_ms: Mapping[int, float]) -> list[CheckRow]:
    """Predicted MoE time against a measured run on the target, per M present in both (ascending)."""
    out = []
    for r in projection.rows:
        m = measured_ms.get(r.M)
        if m is None or m <= 0:
            continue
        out.append(CheckRow(M=r.M, predicted_ms=r.moe_ms, measured_ms=m, error_pct=(r.moe_ms - m) / m * 100.0))
    return out
