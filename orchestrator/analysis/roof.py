"""Efficiency against the measured memory roof — pure.

The datasheet bandwidth (``analysis/gpus.py``) is a ceiling no kernel reaches; the engineers' second question
is "how close to what this very GPU can copy?". The ``hbm-bandwidth`` suite measures that roof
(device-to-device copy, GB/s = 1e9 bytes/s counting bytes read plus written); this module turns it into a
percentage for the suites whose ``gbps`` metric is weight+activation bytes streamed per s (``moe-sweep``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

ROOF_SUITE = "hbm-bandwidth"
ROOF_METRIC = "gbps"
# Suites whose ``gbps`` is memory traffic and therefore comparable with the copy roof. Collective suites
# report bus bandwidth under similar names and must not be compared with HBM.
ROOF_COMPARABLE_SUITES = frozenset({"moe-sweep"})


@dataclass(frozen=True, kw_only=True)
class MeasuredRoof:
    """A host's copy roof as used at query time: ``gbps`` (GB/s, the best median of its latest hbm-bandwidth run
    with results), that run's id and start time. The roof is looked up when a result is read, so a roof measured
    after a sweep still applies to it."""

    gbps: float
    run_id: str
    measured_at: datetime | None


def cache_words(device: Any) -> str:
    """Where a cache-resident working set lives: "the CPU's caches" for a result measured on the CPU (its info's
    ``device``), else "the GPU's cache"."""
    return "the CPU's caches" if device == "cpu" else "the GPU's cache"


def above_roof_note(pct: float | None, metrics: Mapping[str, Any], device: Any = None) -> str | None:
    """Why a "% of roof" above 100 is not a kernel beating the memory: None at or below 100.

    Above 100 the bytes did not all come from HBM: a small layer's weights (``weight_bytes``, B) stay resident in
    the GPU's L2 cache between timed calls (tens of MB on H100/H200/B200), so the figure is cache bandwidth. (Also,
    ``gbps`` counts bytes read while the copy roof counts bytes read plus written, so a read-only stream can
    exceed the copy roof by a few percent.) ``device``: the result's (info ``device``); on ``cpu`` the words are
    the CPU's caches and DRAM."""
    if pct is None or not math.isfinite(pct) or pct <= 100.0:
        return None
    from orchestrator.numfmt import number

    wb = metric_center(metrics.get("weight_bytes"))
    size = f" ({number(wb / 1e6)} MB of weights)" if wb else ""
    return (
        f"{pct:.0f}% of the copy roof: a cache-resident working set{size}: the weights stay in "
        f"{cache_words(device)} between calls, so this measures cache, not {'DRAM' if device == 'cpu' else 'HBM'}, "
        "bandwidth"
    )


def metric_center(metric: Mapping[str, Any] | None) -> float | None:
    """The headline figure of a stored metric: its median when present, else its value; None if unusable."""
    if not isinstance(metric, Mapping):
        return None
    for key in ("median", "value"):
        v = metric.get(key)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return None


def measured_roof_gbps(copy_gbps: Iterable[float | None]) -> float | None:
    """The roof from one host's latest hbm-bandwidth results: the best median copy bandwidth, GB/s.

    Several buffer sizes may have been measured; the highest is what the memory system demonstrably sustains.
    Returns None when no positive figure is given.
    """
    good = [g for g in copy_gbps if g is not None and math.isfinite(g) and g > 0]
    return max(good) if good else None


def pct_of_measured_roof(achieved_gbps: float | None, roof_gbps: float | None) -> float | None:
    """``achieved / roof * 100`` (percent), or None when either is missing or the roof is not positive."""
    if achieved_gbps is None or roof_gbps is None or not roof_gbps > 0 or not math.isfinite(achieved_gbps):
        return None
    return achieved_gbps / roof_gbps * 100.0


def applies_to(suite: str) -> bool:
    return suite in ROOF_COMPARABLE_SUITES
