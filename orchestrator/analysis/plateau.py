"""Where a MoE batch-size sweep is memory-bound and where compute takes over — pure.

A MoE layer's time per call over the token count M has three regimes (the seed analysis and REFERENCE.md's
"MoE roofline arithmetic"): a **ramp** while more tokens touch more experts (more weights to stream), a **plateau**
once every routed expert's weights are streamed once per call (more tokens cost almost nothing: memory-bound), and
a **compute-bound rise** when the FLOPs per call outgrow the time the weights take to stream. Two figures mark it:

- ``plateau_from_m``: the smallest M from which (a) the routed experts are touched — at least ``1 − tol`` of
  them, so the weights not yet read are within the time tolerance — and (b) the time per call stays within ``tol``
  of the plateau level up to the compute-bound start.
- ``compute_bound_from_m``: the smallest M above the level point whose time exceeds the level by more than ``tol``
  (the time leaves the plateau upward); None when the sweep ends on its plateau.

The **plateau level** is the time at the level point: the smallest M at which every expert is touched (measured
``distinct_experts`` equal to all of them; without a measurement, fewer than half an expert expected untouched:
E·(1 − k/E)^M < 0.5) and whose next point stays within ``tol`` of it — a plateau needs two points. A sweep with
no such point (a ramp that never flattens, e.g. the tiny preset on a CPU, or a sweep that stops before all experts
are touched) has **no plateau within the sweep**: both figures are None and ``reason`` says why.

Expected touched experts for M tokens each choosing k of E uniformly: D(M) = E·(1 − (1 − k/E)^M) (REFERENCE.md);
the measured count from the routing wins when the result has one. Shared experts are always touched.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_TOL = 0.10
"""Band around the plateau level, as a fraction (10%): about the spread of repeated sweeps on one GPU."""

NO_PLATEAU = "no plateau within the sweep"


@dataclass(frozen=True)
class SweepPoint:
    """One case of a sweep: ``m`` tokens, median ``time_ms`` per call (ms); ``touched`` experts of ``experts``
    (routed plus shared; both None when the case is not a MoE layer: every point then counts as touched)."""

    m: int
    time_ms: float
    touched: float | None = None
    experts: int | None = None

    def covered(self, tol: float) -> bool:
        return self.touched is None or self.experts is None or self.touched >= (1 - tol) * self.experts

    def all_touched(self) -> bool:
        return self.touched is None or self.experts is None or self.experts - self.touched < 0.5


@dataclass(frozen=True)
class Plateau:
    """The sweep's figures (M in tokens, ``level_ms`` in ms); ``reason`` is set when there is no plateau."""

    plateau_from_m: int | None
    compute_bound_from_m: int | None
    level_ms: float | None
    tol: float
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "plateau_from_m": self.plateau_from_m,
            "compute_bound_from_m": self.compute_bound_from_m,
            "level_ms": self.level_ms,
            "metric": "time_ms",
            "tol": self.tol,
            "reason": self.reason,
        }


def expected_touched(m: int, experts: int, top_k: int) -> float:
    """D(M) = E·(1 − (1 − k/E)^M): expected distinct routed experts for ``m`` tokens choosing ``top_k`` of
    ``experts`` uniformly (REFERENCE.md, "MoE roofline arithmetic")."""
    if experts <= 0 or not 0 < top_k <= experts:
        raise ValueError(f"need 0 < k <= E, got E={experts}, k={top_k}")
    return experts * (1 - (1 - top_k / experts) ** m)


def sweep_plateau(points: Iterable[SweepPoint], tol: float = DEFAULT_TOL) -> Plateau:
    """The plateau and the compute-bound start of a sweep (definitions in the module docstring).

    ``points`` in any order. Raises ValueError for ``tol`` outside [0, 1), a time that is not positive, or the
    same M twice."""
    if not 0 <= tol < 1:
        raise ValueError(f"tol must be in [0, 1), got {tol}")
    pts = sorted(points, key=lambda p: p.m)
    for a, b in zip(pts, pts[1:], strict=False):
        if a.m == b.m:
            raise ValueError(f"M={a.m} appears more than once")
    for p in pts:
        if not p.time_ms > 0:
            raise ValueError(f"time at M={p.m} must be positive, got {p.time_ms}")
    if not pts:
        return Plateau(None, None, None, tol, f"{NO_PLATEAU} (no points)")
    anchor = next(
        (
            i
            for i in range(len(pts) - 1)
            if pts[i].all_touched() and abs(pts[i + 1].time_ms - pts[i].time_ms) <= tol * pts[i].time_ms
        ),
        None,
    )
    if anchor is None:
        why = (
            "the routed experts are not all touched by its largest M"
            if not pts[-1].all_touched()
            else "the time per call never stays flat between two points"
        )
        return Plateau(None, None, None, tol, f"{NO_PLATEAU} ({why})")
    level = pts[anchor].time_ms
    # the band's test as the anchor's (t - level against tol·level): (1 + tol)·level rounds differently, and a point
    # that made the pair flat could be called the compute-bound start too
    compute = next((p.m for p in pts[anchor + 1 :] if p.time_ms - level > tol * level), None)
    start = anchor
    while start > 0 and pts[start - 1].covered(tol) and abs(pts[start - 1].time_ms - level) <= tol * level:
        start -= 1
    return Plateau(pts[start].m, compute, level, tol)


def moe_points(rows: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> list[SweepPoint]:
    """Sweep points from ``(case, metrics)`` pairs of moe-sweep results: ``case`` holds ``M`` and, for the
    expert counts, ``E``, ``k`` and ``shared``; ``metrics`` holds ``time_ms`` and, when the bench counted the
    routing, ``distinct_experts`` (routed plus shared). Pairs without an integer M or a time are skipped."""
    out: list[SweepPoint] = []
    for case, metrics in rows:
        m, t = case.get("M"), _value(metrics.get("time_ms"))
        if not isinstance(m, int) or isinstance(m, bool) or t is None:
            continue
        e, k, shared = case.get("E"), case.get("k"), case.get("shared", 0)
        touched: float | None = None
        experts: int | None = None
        if isinstance(e, int) and isinstance(k, int) and isinstance(shared, int) and 0 < k <= e:
            experts = e + shared
            measured = _value(metrics.get("distinct_experts"))
            touched = measured if measured is not None else expected_touched(m, e, k) + shared
        out.append(SweepPoint(m, t, touched, experts))
    return out


def _value(metric: Any) -> float | None:
    if not isinstance(metric, Mapping):
        return None
    v = metric.get("median", metric.get("value"))
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
