"""Regressions called with statistics: rank test, bootstrap interval of the ratio of medians, FDR control — pure.

For one case (one host, one parameter set, one metric) the raw samples of a base run and a head run are compared:

* ``p_value``: two-sided Mann–Whitney U test of the two samples (``scipy.stats.mannwhitneyu``; exact for small
  samples without ties, else the normal approximation with tie correction). Source: Mann & Whitney (1947),
  SciPy's documentation.
* ``ci_low``..``ci_high``: a ``confidence`` (default 95%) bootstrap percentile interval of
  ``median(head) / median(base)`` (``scipy.stats.bootstrap``, the two samples resampled independently,
  ``n_resamples`` draws from a generator seeded with ``seed``: the same samples always give the same interval).
  Source: Efron & Tibshirani, *An Introduction to the Bootstrap* (1993), ch. 13.
* ``q_value``: the Benjamini–Hochberg adjusted p-value over every case of one comparison
  (``scipy.stats.false_discovery_control``), so that among the cases called, the expected share of false calls
  stays at or below ``alpha`` (default 0.05). Source: Benjamini & Hochberg (1995), J. R. Stat. Soc. B 57.
* ``band``: the noise band, a relative half-width on a log scale: a change of the ratio within
  ``[1 / (1 + band), 1 + band]`` is what identical runs produce (``noise_band``; from an A/A calibration when
  one is stored, else from the within-run samples alone). On a log scale a speed-up and a slow-down of one factor
  weigh the same; a linear ``[1 - band, 1 + band]`` reaches 0 once the band reaches 1, and then nothing could be
  called faster (a 4,000x speed-up was "within noise" of a side spanning 0.222–9.57 ms).

The call (``call_case``): ``slower``/``faster`` only when ``q_value <= alpha`` **and** the whole interval lies
outside the band on one side; otherwise ``within noise`` — or ``noisy`` (not judged) when the band is wider
than ``analysis.compare.NOT_JUDGED_BAND`` (50%): a case that noisy could hide any change of a useful size.
Direction: for lower-is-better metrics (times) a ratio above the band is ``slower``; for higher-is-better
metrics (GB/s, tokens/s) a ratio below it is ``slower``.
``n/a`` when a side has fewer than ``MIN_SAMPLES`` samples, a median is not positive, the metric's direction
is unknown, or the samples are too few for the rank test to ever reach ``alpha`` (``underpowered``: 3 against 3
samples give at best p = 0.1); such a case is left out of the BH adjustment.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Literal

import numpy as np

from orchestrator.analysis.casestats import BandSource as BandSource  # re-exported: stats.BandSource etc.
from orchestrator.analysis.casestats import Call as Call
from orchestrator.analysis.casestats import CaseStats as CaseStats
from orchestrator.analysis.compare import NOT_JUDGED_BAND

ALPHA = 0.05  # false discovery rate across one comparison's cases (Benjamini & Hochberg 1995)
CONFIDENCE = 0.95  # bootstrap interval level
N_RESAMPLES = 1000  # bootstrap draws (Efron & Tibshirani 1993, ch. 19: ~1000 for percentile intervals)
SEED = 0  # bootstrap generator seed: reruns of a comparison give identical intervals
BOOTSTRAP_BATCH = 100  # resamples drawn at a time; fixed, so a case's draws never depend on the other cases
MWU_EXACT_MAX = 8  # SciPy's mannwhitneyu 'auto': asymptotic when both samples exceed 8, else exact unless ties
MIN_SAMPLES = 3  # fewer samples per side: no test (Mann-Whitney's smallest two-sided p at 3 vs 3 is 0.1)
WITHIN_RUN_QUANTILES = (0.10, 0.90)  # the within-run spread: half the p10-p90 width relative to the median


def _clean(xs: Sequence[float] | None) -> np.ndarray[Any, np.dtype[np.float64]]:
    arr = np.asarray([x for x in (xs or ()) if isinstance(x, (int, float)) and not isinstance(x, bool)], dtype=float)
    out: np.ndarray[Any, np.dtype[np.float64]] = arr[np.isfinite(arr)]
    return out


def within_run_spread(samples: Sequence[float]) -> float | None:
    """Half the p10–p90 width of ``samples`` on a log scale, as a relative half-width: sqrt(p90 / p10) − 1
    (0.0128 for normal samples with a 1% standard deviation; 5.57 for p10 0.222 and p90 9.57: a band of
    0.152x–6.57x). With a p10 <= 0 (no factor bounds it), half the p10–p90 width relative to the median.
    None with fewer than ``MIN_SAMPLES`` finite samples or a median <= 0."""
    x = _clean(samples)
    if x.size < MIN_SAMPLES:
        return None
    med = float(np.median(x))
    if med <= 0:
        return None
    lo, hi = (float(q) for q in np.quantile(x, WITHIN_RUN_QUANTILES))
    if lo <= 0:
        return (hi - lo) / 2.0 / med
    return math.sqrt(hi / lo) - 1.0


def noise_band(
    base: Sequence[float], head: Sequence[float], calibrated: float | None = None
) -> tuple[float, BandSource]:
    """The relative noise half-width for one case and where it came from.

    Within-run: the larger of the two sides' ``within_run_spread`` (0.0 when neither has enough samples).
    With ``calibrated`` (the stored A/A run-to-run spread of this host and case, see ``aa_spread``): the larger
    of that and the within-run figure, source ``calibration`` — identical runs differ at least as much as the
    samples within one run scatter."""
    spreads = [s for s in (within_run_spread(base), within_run_spread(head)) if s is not None]
    within = max(spreads) if spreads else 0.0
    if calibrated is not None and math.isfinite(calibrated):
        return max(float(calibrated), within), "calibration"
    return within, "within-run"


def aa_spread(medians: Sequence[float]) -> float | None:
    """Run-to-run spread of identical (A/A) runs of one case: the largest ``|m_i / m_j - 1|`` over every pair of
    the runs' medians (i != j). With 3 runs (``orch calibrate``'s default) that is the widest of 3 ratios. None
    with fewer than 2 positive medians."""
    m = [float(x) for x in medians if isinstance(x, (int, float)) and math.isfinite(x) and x > 0]
    if len(m) < 2:
        return None
    return max(hi / lo - 1.0 for hi in m for lo in m if hi >= lo)


def _median(x: Any, axis: int = -1) -> Any:
    """``np.median`` along ``axis`` for finite input, by a full sort: on the bootstrap's (resamples, cases, n)
    arrays of a few dozen samples per case it is ~4x faster than NumPy's partition-based median."""
    s = np.moveaxis(np.sort(x, axis=axis), axis, -1)
    n = s.shape[-1]
    lo = s[..., (n - 1) // 2]
    return lo if n % 2 else (lo + s[..., n // 2]) / 2.0


def _ratio_of_medians(b: Any, h: Any, axis: int = -1) -> Any:
    return _median(h, axis) / _median(b, axis)


def compare_samples(
    base: Sequence[float],
    head: Sequence[float],
    *,
    band: float = 0.0,
    band_source: BandSource = "within-run",
    direction: Literal["lower", "higher"] | None = "lower",
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> CaseStats:
    """Statistics of one case from its raw samples (any unit, both sides the same). The call uses the p-value
    alone (no multiple-comparison adjustment); ``call_cases`` adjusts a whole comparison. Raises ValueError for
    ``confidence`` outside (0, 1) or a negative ``band``."""
    return compare_many(
        [(base, head, band, band_source)], direction=direction, confidence=confidence, n_resamples=n_resamples,
        seed=seed,
    )[0]  # fmt: skip


CaseInput = tuple[Sequence[float], Sequence[float], float, BandSource]  # base samples, head samples, band, source


def compare_many(
    cases: Sequence[CaseInput],
    *,
    direction: Literal["lower", "higher"] | None = "lower",
    confidence: float = CONFIDENCE,
    n_resamples: int = N_RESAMPLES,
    seed: int = SEED,
) -> list[CaseStats]:
    """``compare_samples`` for many cases at once, in order. Cases with the same sample counts go to SciPy as
    one 2-D array (``mannwhitneyu`` and ``bootstrap`` along ``axis=-1``): the per-call overhead is paid once per
    group, not per case. Each group's bootstrap draws come from a generator seeded with ``seed`` and are the
    same for every case of the group (SciPy resamples all slices with one index array), so a case's interval
    depends only on its samples, ``seed`` and its sample counts — never on the other cases compared."""
    from scipy import stats

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    out: list[CaseStats | None] = [None] * len(cases)
    groups: dict[tuple[int, int], list[int]] = {}
    clean: list[tuple[Any, Any]] = []
    for i, (base, head, band, source) in enumerate(cases):
        if band < 0:
            raise ValueError(f"band must be >= 0, got {band}")
        b, h = _clean(base), _clean(head)
        clean.append((b, h))
        na = CaseStats(None, None, None, None, None, band, source, "n/a", int(b.size), int(h.size))
        if b.size < MIN_SAMPLES or h.size < MIN_SAMPLES or np.median(b) <= 0 or np.median(h) <= 0:
            out[i] = na
            continue
        groups.setdefault((int(b.size), int(h.size)), []).append(i)
    for idx in groups.values():
        bs = np.stack([clean[i][0] for i in idx])
        hs = np.stack([clean[i][1] for i in idx])
        ratios = np.median(hs, axis=-1) / np.median(bs, axis=-1)
        with warnings.catch_warnings():
            # identical samples: SciPy warns that the test's variance or the interval is degenerate
            warnings.simplefilter("ignore", RuntimeWarning)
            if min(bs.shape[1], hs.shape[1]) > MWU_EXACT_MAX:  # SciPy's 'auto' is asymptotic for every case
                ps = np.asarray(stats.mannwhitneyu(hs, bs, alternative="two-sided", axis=-1).pvalue, dtype=float)
            else:  # 'auto' picks exact or asymptotic by ties, judged over the whole array: one case at a time
                one = [stats.mannwhitneyu(y, x, alternative="two-sided").pvalue for x, y in zip(bs, hs, strict=True)]
                ps = np.asarray(one, dtype=float)
            res = stats.bootstrap(
                (bs, hs),
                _ratio_of_medians,
                vectorized=True,
                paired=False,
                axis=-1,
                n_resamples=n_resamples,
                batch=BOOTSTRAP_BATCH,
                confidence_level=confidence,
                method="percentile",
                rng=np.random.default_rng(seed),
            )
        lows = np.atleast_1d(np.asarray(res.confidence_interval.low, dtype=float))
        highs = np.atleast_1d(np.asarray(res.confidence_interval.high, dtype=float))
        for j, i in enumerate(idx):
            b, h = clean[i]
            _, _, band, source = cases[i]
            ratio = float(ratios[j])
            p = float(ps[j]) if math.isfinite(ps[j]) else 1.0  # all samples equal: no evidence of a change
            if np.ptp(np.concatenate([b, h])) == 0:
                p = 1.0
            lo, hi = _finite(lows[j]), _finite(highs[j])
            if np.ptp(b) == 0 and np.ptp(h) == 0:
                lo = hi = ratio  # every resample gives the ratio; SciPy's interval of a constant is NaN
            # Otherwise an end that is not finite stays unknown (None), never the ratio: a side with values <= 0
            # can resample to a median of 0, and its ratios to inf or NaN (0/0) — an interval [3.0, nan] is not
            # the certainty [3.0, 3.0].
            st = CaseStats(ratio, lo, hi, p, None, band, source, "n/a", int(b.size), int(h.size))
            out[i] = replace(st, call=call_case(st, direction, p, ALPHA))
    return [x for x in out if x is not None]


def _finite(x: Any) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def underpowered(n_base: int, n_head: int, alpha: float = ALPHA) -> bool:
    """Whether the smallest two-sided Mann–Whitney p-value for these sample counts, ``2 / C(n_base + n_head,
    n_base)`` (the two most extreme orderings, no ties), exceeds ``alpha``: no data could make the test call
    a change. True for 3 against 3 (0.1), false for 4 against 4 (0.029)."""
    if n_base < 1 or n_head < 1:
        return True
    return 2.0 / math.comb(n_base + n_head, n_base) > alpha


def samples_needed(alpha: float = ALPHA) -> int:
    """The fewest samples per side (the same count on both) that the rank test can ever call at ``alpha``: the
    smallest n >= ``MIN_SAMPLES`` that is not ``underpowered(n, n)``. 4 at alpha 0.05 (2 / C(8, 4) = 0.029;
    3 against 3 gives at best 0.1). What ``orch runs check`` tells a user to rerun with (``--repeat N``)."""
    n = MIN_SAMPLES
    while underpowered(n, n, alpha):
        n += 1
    return n


def call_case(st: CaseStats, direction: Literal["lower", "higher"] | None, p: float | None, alpha: float) -> Call:
    """``slower``/``faster`` when ``p <= alpha`` and the interval ``[ci_low, ci_high]`` lies wholly outside
    ``[1 / (1 + band), 1 + band]`` (see the module docstring for the direction), else ``within noise``, or
    ``noisy`` when ``band`` exceeds ``analysis.compare.NOT_JUDGED_BAND``; ``n/a`` without an interval, a p-value
    or a direction, or when ``underpowered``. An interval with one end unknown (None: not finite) is judged by
    its known end only: ``slower`` needs ``ci_low``, ``faster`` needs ``ci_high``."""
    if st.ratio is None or (st.ci_low is None and st.ci_high is None) or p is None or direction is None:
        return "n/a"
    if underpowered(st.n_base, st.n_head, alpha):
        return "n/a"
    if p <= alpha:
        if st.ci_low is not None and st.ci_low > 1.0 + st.band:
            return "slower" if direction == "lower" else "faster"
        if st.ci_high is not None and st.ci_high < 1.0 / (1.0 + st.band):
            return "faster" if direction == "lower" else "slower"
    return "noisy" if st.band > NOT_JUDGED_BAND else "within noise"


def bh_adjust(p_values: Sequence[float]) -> list[float]:
    """Benjamini–Hochberg adjusted p-values (``scipy.stats.false_discovery_control``, method ``bh``), in the
    given order; ``[]`` for no input."""
    if not p_values:
        return []
    from scipy import stats

    return [float(q) for q in stats.false_discovery_control(np.asarray(p_values, dtype=float), method="bh")]


def call_cases(
    cases: Sequence[CaseStats], direction: Literal["lower", "higher"] | None, alpha: float = ALPHA
) -> list[CaseStats]:
    """The cases of one comparison with ``q_value`` (BH over the cases that have a p-value) and ``call``
    recomputed from it: the expected share of false ``slower``/``faster`` calls stays <= ``alpha``."""
    tested = [i for i, c in enumerate(cases) if c.p_value is not None and not underpowered(c.n_base, c.n_head, alpha)]
    qs = bh_adjust([cases[i].p_value for i in tested])  # type: ignore[misc]
    out = list(cases)
    for i, q in zip(tested, qs, strict=True):
        c = replace(out[i], q_value=q)
        out[i] = replace(c, call=call_case(c, direction, q, alpha))
    return out
