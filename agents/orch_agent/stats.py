"""Summary statistics of timing samples, in the metric shape of the protocol's ``result`` event."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(sorted_samples: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (numpy's default)."""
    if not sorted_samples:
        raise ValueError("percentile of no samples")
    pos = (len(sorted_samples) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_samples) - 1)
    frac = pos - lo
    return float(sorted_samples[lo] + (sorted_samples[hi] - sorted_samples[lo]) * frac)


def summarize(samples: Sequence[float], unit: str, ndigits: int = 6) -> dict[str, object]:
    """``{"value" (the median), "unit", "median", "p10", "p90", "min", "max", "n", "samples"}``."""
    xs: list[float] = [float(x) for x in samples]
    if not xs:
        raise ValueError("no samples to summarize")
    s = sorted(xs)
    med = percentile(s, 50)
    return {
        "value": round(med, ndigits),
        "unit": unit,
        "median": round(med, ndigits),
        "p10": round(percentile(s, 10), ndigits),
        "p90": round(percentile(s, 90), ndigits),
        "min": round(s[0], ndigits),
        "max": round(s[-1], ndigits),
        "n": len(xs),
        "samples": [round(x, ndigits) for x in xs],
    }
