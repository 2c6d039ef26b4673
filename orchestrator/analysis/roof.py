"""Efficiency against the measured memory roof — pure.

The datasheet bandwidth (``analysis/gpus.py``) is a ceiling no kernel reaches; the engineers' second question
is "how close to what this very GPU can copy?". The ``hbm-bandwidth`` suite measures that roof
(device-to-device copy, GB/s = 1e9 bytes/s counting bytes read plus written); this module turns it into a
percentage for the suites whose ``gbps`` metric is weight+activation bytes streamed per s (``moe-sweep``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

ROOF_SUITE = "hbm-bandwidth"
ROOF_METRIC = "gbps"
# Suites whose ``gbps`` is memory traffic and therefore comparable with the copy roof. Collective suites
# report bus bandwidth under similar names and must not be compared with HBM.
ROOF_COMPARABLE_SUITES = frozenset({"moe-sweep"})


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
