"""Where a batch-size sweep stops getting slower per call: the start of the time plateau — pure."""

from __future__ import annotations

from collections.abc import Iterable


def plateau_start(points: Iterable[tuple[int, float]], tol: float = 0.10) -> int | None:
    """The smallest M from which the time per call stays within ``tol`` of the time at the largest M.

    ``points`` are ``(M, time_ms)`` pairs in any order. With T the time at the largest M, the answer is the
    smallest M such that every point with M' >= M has |t − T| <= tol·T. In a memory-bound MoE sweep this is
    the batch size from which all experts' weights are streamed and more tokens cost (almost) nothing.

    A non-monotone sweep is handled as the definition says: one outlier above the plateau start moves the
    start past it. The largest M is always on its own plateau, so one point returns its M; no points return
    ``None``.

    Raises:
        ValueError: ``tol`` < 0, a time that is not positive, or the same M given twice.
    """
    if tol < 0:
        raise ValueError(f"tol must be >= 0, got {tol}")
    pts = sorted(points)
    if not pts:
        return None
    seen: set[int] = set()
    for m, t in pts:
        if m in seen:
            raise ValueError(f"M={m} appears more than once")
        if not t > 0:
            raise ValueError(f"time at M={m} must be positive, got {t}")
        seen.add(m)
    t_last = pts[-1][1]
    start = pts[-1][0]
    for m, t in reversed(pts):
        if abs(t - t_last) > tol * t_last:
            break
        start = m
    return start
