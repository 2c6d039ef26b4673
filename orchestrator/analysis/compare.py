"""Compare two runs case by case: head/base ratio of medians, geometric mean, verdict per case — pure.

Input rows are plain dicts shaped like the agent's ``result`` events (and the store's result rows)::

    {"host": "b300-0", "case": {"M": 1, "E": 384, ...},
     "metrics": {"time_ms": {"value": 0.30, "unit": "ms", "median": 0.30, ...}, ...}}

``host`` is optional. Cases are paired by ``case_key`` (host plus every case parameter). The figure compared
is a metric's ``median`` when present, else its ``value``.

Direction: time-like metrics (units ms, us, µs, s, or names such as ``time_ms``, ``ttft``, ``tpot``, ``itl``)
are lower-is-better; rates (GB/s, TFLOP/s, tokens/s, %) are higher-is-better. A metric of unknown direction
gets the ratio but the verdict ``n/a``.

Noise: a metric's stored ``p10``/``p90`` (the 10th and 90th percentiles of its samples) say how far one
measurement scatters. A case is *noisy* when its change cannot be told from that scatter (see ``is_noisy``; the
change and the scatter are compared as factors, on a log scale); its verdict is then ``within noise`` instead of
``regression``/``improvement``, and its ratio is kept — unless a side scatters so widely that no useful change could
be told from it (``log_band`` above ``NOT_JUDGED_BAND``): then ``noisy: not judged``, never ``within noise``.
A side with fewer samples than the rank test needs is ``too few samples: not judged`` (``TOO_FEW``, set where the
sample counts are known: ``store.stats_repo.with_statistics``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

Direction = Literal["lower", "higher"]
Verdict = Literal[
    "regression", "improvement", "unchanged", "within noise", "noisy: not judged", "too few samples: not judged", "n/a"
]

_LOWER_UNITS = frozenset({"ms", "us", "µs", "s", "ns", "s/token", "ms/token", "us/token", "µs/token"})
_HIGHER_UNITS = frozenset({"GB/s", "TB/s", "TFLOP/s", "tokens/s", "tok/s", "token/s", "req/s", "%", "1/s"})
_LOWER_NAMES = ("time", "latency", "ttft", "tpot", "itl", "e2e", "us_per_token", "_ms", "_us", "_s")
_HIGHER_NAMES = ("gbps", "tflops", "throughput", "tokens_per_s", "tok_s", "pct", "accept")


def metric_direction(name: str, unit: str = "") -> Direction | None:
    """``"lower"`` or ``"higher"`` is better for a metric, by its unit, else its name; None if unknown."""
    if unit in _LOWER_UNITS:
        return "lower"
    if unit in _HIGHER_UNITS:
        return "higher"
    lname = name.lower()
    if any(h in lname for h in _HIGHER_NAMES):
        return "higher"
    if any(h in lname for h in _LOWER_NAMES):
        return "lower"
    return None


def case_key(row: Mapping[str, Any]) -> str:
    """Stable pairing key of a result row: ``host=H`` (when present) then ``name=value`` of every case
    parameter, sorted by name, space-separated; lists are comma-joined. Example: ``host=b300-0 E=384 M=1``."""
    parts: list[str] = []
    if row.get("host") is not None:
        parts.append(f"host={row['host']}")
    case = row.get("case") or {}
    for name in sorted(case):
        v = case[name]
        text = ",".join(str(x) for x in v) if isinstance(v, (list, tuple)) else str(v)
        parts.append(f"{name}={text}")
    return " ".join(parts)


@dataclass(frozen=True)
class CaseComparison:
    """One metric of one paired case. ``ratio`` = head/base (None when base is 0); ``change`` = ratio − 1."""

    key: str
    metric: str
    unit: str
    base: float
    head: float
    ratio: float | None
    change: float | None
    direction: Direction | None
    verdict: Verdict
    noisy: bool | None = None  # see is_noisy; None when a side has no p10/p90

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "metric": self.metric,
            "unit": self.unit,
            "base": self.base,
            "head": self.head,
            "ratio": self.ratio,
            "change": self.change,
            "direction": self.direction,
            "verdict": self.verdict,
            "noisy": self.noisy,
        }


@dataclass(frozen=True)
class Comparison:
    """Every paired case and metric, the geometric mean of the head/base ratio per metric, and the keys
    present on one side only."""

    cases: list[CaseComparison]
    geomean: dict[str, float]
    only_base: list[str] = field(default_factory=list)
    only_head: list[str] = field(default_factory=list)
    threshold: float = 0.05

    @property
    def regressions(self) -> list[CaseComparison]:
        return [c for c in self.cases if c.verdict == "regression"]

    @property
    def improvements(self) -> list[CaseComparison]:
        return [c for c in self.cases if c.verdict == "improvement"]

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "geomean": dict(self.geomean),
            "cases": [c.to_dict() for c in self.cases],
            "only_base": list(self.only_base),
            "only_head": list(self.only_head),
        }


def verdict(ratio: float | None, direction: Direction | None, threshold: float = 0.05) -> Verdict:
    """``regression``/``improvement`` when head/base moved beyond ``threshold`` (0.05 = 5%) in the bad/good
    direction, ``unchanged`` within it (a change of exactly the threshold is unchanged), ``n/a`` without a
    ratio or a direction."""
    if ratio is None or direction is None:
        return "n/a"
    if ratio > 1.0 + threshold:
        return "regression" if direction == "lower" else "improvement"
    if ratio < 1.0 - threshold:
        return "improvement" if direction == "lower" else "regression"
    return "unchanged"


def is_noisy(
    base: float,
    base_p10: float | None,
    base_p90: float | None,
    head: float,
    head_p10: float | None,
    head_p90: float | None,
) -> bool | None:
    """Whether the change from ``base`` to ``head`` (two medians) is within the measurement noise.

    True when the p10–p90 ranges of base and head overlap (touching ends count), or when either side's spread
    exceeds the change being reported, both as factors: ln(p90 / p10) > |ln(head / base)|. On a log scale a
    faster and a slower change of one factor weigh the same (a linear |head/base − 1| can never exceed 1 for
    a faster head, so any spread above 100% hid every speed-up, and a 1,379x slowdown hid behind a side
    whose linear spread was larger). A side whose median is <= 0 has no relative spread (only the overlap test
    applies to it); a side whose p10 is <= 0 is compared linearly, (p90 − p10) / median > |head/base − 1|.
    None when either side lacks its p10 or p90: the noise is unknown.

    Examples: base 0.17 (p10 0.16, p90 53.0) against head 0.04 (0.039–0.041) is noisy: the ranges are apart,
    but base's spread ln(53.0 / 0.16) ≈ 5.8 exceeds the change |ln 0.235| ≈ 1.45. Base 212 (182–281) against
    head 0.230 (0.222–9.57) is not: head's spread ln 43 ≈ 3.8 is below the change |ln 0.00108| ≈ 6.8.
    """
    if base_p10 is None or base_p90 is None or head_p10 is None or head_p90 is None:
        return None
    if base_p10 <= head_p90 and head_p10 <= base_p90:
        return True
    if base <= 0:
        return False
    ratio = head / base
    for median, p10, p90 in ((base, base_p10, base_p90), (head, head_p10, head_p90)):
        if median <= 0:
            continue
        if p10 > 0 and ratio > 0:
            if math.log(p90 / p10) > abs(math.log(ratio)):
                return True
        elif (p90 - p10) / median > abs(ratio - 1.0):
            return True
    return False


NOT_JUDGED_BAND = 0.50
"""A noise band (relative half-width on a log scale, ``log_band``; or a calibrated A/A band) above this is too
wide to judge a case by: it would call nothing short of a 1.5x change, ten times compare's 5% threshold
(``store.repo.COMPARE_THRESHOLD``). A change inside such a band is ``noisy: not judged``, not ``within noise``.
The same limit as ``orch calibrate``'s warning (``regress.WIDE_BAND``, docs/statistics.md)."""


def log_band(median: Any, p10: Any, p90: Any) -> float | None:
    """The relative noise half-width of one measurement on a log scale: sqrt(p90 / p10) − 1, so that its band
    is [1 / (1 + b), 1 + b] around a ratio of 1 (p10 0.222, p90 9.57: 5.57, a band of 0.152x–6.57x). ``inf``
    when p10 <= 0 < p90 (no factor bounds it); None when a figure is missing or not a number, or the median is
    <= 0."""
    nums = (median, p10, p90)
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in nums):
        return None
    if median <= 0:
        return None
    if p10 <= 0:
        return math.inf if p90 > 0 else None
    return math.sqrt(p90 / p10) - 1.0 if p90 >= p10 else None


def too_noisy(
    base: float, base_p10: Any, base_p90: Any, head: float, head_p10: Any, head_p90: Any, limit: float = NOT_JUDGED_BAND
) -> bool:
    """Whether either side's ``log_band`` exceeds ``limit`` (default ``NOT_JUDGED_BAND``): too noisy to judge."""
    bands = (log_band(base, base_p10, base_p90), log_band(head, head_p10, head_p90))
    return any(b is not None and b > limit for b in bands)


WIDE_SPREAD = 0.20
"""A measurement whose (p90 − p10) / median exceeds this is *noisy* (docs/metrics.md "Noisy measurements"): its
p10–p90 half-width (~10%) is then twice compare's 5% threshold, so a change of the size
compare calls cannot be told from one such measurement (``store.repo.COMPARE_THRESHOLD``)."""

VERDICTS: tuple[Verdict, ...] = (
    "regression", "improvement", "unchanged", "within noise", "noisy: not judged", "too few samples: not judged", "n/a"
)
TOO_FEW: Verdict = "too few samples: not judged"
"""The verdict of a case one of whose sides holds fewer samples than the rank test needs
(``analysis.stats.MIN_SAMPLES``; set by ``store.stats_repo.with_statistics``): a single measurement has no
spread, so neither the test nor its p10/p90 can tell a change from noise."""


def relative_spread(median: Any, p10: Any, p90: Any) -> float | None:
    """(p90 − p10) / median of one measurement (0.2 = the p10–p90 range is 20% of the median); None when a
    figure is missing or not a number, or the median is <= 0."""
    nums = (median, p10, p90)
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in nums):
        return None
    if median <= 0:
        return None
    return float((p90 - p10) / median)


def is_wide(median: Any, p10: Any, p90: Any, limit: float = WIDE_SPREAD) -> bool:
    """Whether one measurement is noisy: its ``relative_spread`` exceeds ``limit`` (default ``WIDE_SPREAD``)."""
    spread = relative_spread(median, p10, p90)
    return spread is not None and spread > limit


def wide_sides(
    base: float, base_p10: Any, base_p90: Any, head: float, head_p10: Any, head_p90: Any
) -> list[str]:
    """``["base"]``, ``["head"]``, both or none: the sides of a comparison whose measurement ``is_wide``."""
    sides = (("base", base, base_p10, base_p90), ("head", head, head_p10, head_p90))
    return [name for name, m, lo, hi in sides if is_wide(m, lo, hi)]


def verdict_counts(verdicts: Sequence[str]) -> dict[str, int]:
    """How many cases have each verdict, every verdict of ``VERDICTS`` present (0 when none): the counts a
    comparison's summary prints, so they are the table's verdicts by construction."""
    counts: dict[str, int] = dict.fromkeys(VERDICTS, 0)
    for v in verdicts:
        counts[v] = counts.get(v, 0) + 1
    return counts


def noise_verdict(
    ratio: float | None,
    direction: Direction | None,
    noisy: bool | None,
    threshold: float = 0.05,
    too_wide: bool = False,
) -> Verdict:
    """For a noisy case (``noisy`` from ``is_noisy``): ``noisy: not judged`` when ``too_wide`` (``too_noisy``:
    a side's band is too wide to judge by), else ``within noise``. Otherwise ``verdict(ratio, direction,
    threshold)``; an unknown noise (None) leaves the verdict to the threshold alone."""
    if noisy:
        return "noisy: not judged" if too_wide else "within noise"
    return verdict(ratio, direction, threshold)


def _stat(m: Mapping[str, Any], name: str) -> float | None:
    x = m.get(name)
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def _figure(m: Any) -> tuple[float, str, float | None, float | None] | None:
    """(median else value, unit, p10, p90) of one metric; None without a finite median or value."""
    if not isinstance(m, Mapping):
        return None
    x = _stat(m, "median") if m.get("median") is not None else _stat(m, "value")
    if x is None:
        return None
    return x, str(m.get("unit", "")), _stat(m, "p10"), _stat(m, "p90")


def _index(
    rows: Sequence[Mapping[str, Any]], key: Callable[[Mapping[str, Any]], str], side: str
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for row in rows:
        k = key(row)
        if k in out:
            raise ValueError(f"{side} has two results for case {k!r}; pair by a key that tells them apart")
        out[k] = row.get("metrics") or {}
    return out


def compare(
    base: Sequence[Mapping[str, Any]],
    head: Sequence[Mapping[str, Any]],
    *,
    metrics: Sequence[str] | None = None,
    threshold: float = 0.05,
    key: Callable[[Mapping[str, Any]], str] = case_key,
) -> Comparison:
    """Compare ``head`` against ``base`` (lists of result rows, see the module docstring).

    For each case key present on both sides and each metric present on both (or only those in ``metrics``),
    ratio = head median / base median, ``noisy`` by ``is_noisy`` from each side's p10/p90, and a verdict by
    ``threshold`` (``within noise`` for a noisy case, ``noisy: not judged`` when a side is ``too_noisy``).
    ``geomean[metric]`` is the geometric mean of that metric's positive ratios. Cases are returned in ``base``
    order, metrics in the base row's order.

    Raises:
        ValueError: ``threshold`` < 0, or two rows of one side with the same key.
    """
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    b, h = _index(base, key, "base"), _index(head, key, "head")
    cases: list[CaseComparison] = []
    logs: dict[str, list[float]] = {}
    for k, bm in b.items():
        if k not in h:
            continue
        hm = h[k]
        for name in bm:
            if (metrics is not None and name not in metrics) or name not in hm:
                continue
            bf, hf = _figure(bm[name]), _figure(hm[name])
            if bf is None or hf is None:
                continue
            (bv, unit, b10, b90), (hv, _, h10, h90) = bf, hf
            ratio = hv / bv if bv != 0 else None
            direction = metric_direction(name, unit)
            noisy = is_noisy(bv, b10, b90, hv, h10, h90)
            wide = too_noisy(bv, b10, b90, hv, h10, h90)
            cases.append(
                CaseComparison(
                    key=k,
                    metric=name,
                    unit=unit,
                    base=bv,
                    head=hv,
                    ratio=ratio,
                    change=None if ratio is None else ratio - 1.0,
                    direction=direction,
                    verdict=noise_verdict(ratio, direction, noisy, threshold, wide),
                    noisy=noisy,
                )
            )
            if ratio is not None and ratio > 0:
                logs.setdefault(name, []).append(math.log(ratio))
    geomean = {name: math.exp(sum(v) / len(v)) for name, v in logs.items()}
    return Comparison(
        cases=cases,
        geomean=geomean,
        only_base=[k for k in b if k not in h],
        only_head=[k for k in h if k not in b],
        threshold=threshold,
    )
