"""Queries behind issue 16's statistics, kept apart from ``repo.py``: the raw samples of a comparison's cases,
the ``calibrations`` table (``orch calibrate``'s A/A noise floor) and the statistical verdicts a ``Comparison``
gets from them (``with_statistics``)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import select

from orchestrator.analysis import stats
from orchestrator.analysis.compare import TOO_FEW, Verdict, metric_direction
from orchestrator.store.models import Calibration, Result
from orchestrator.store.models import Run as RunRow
from orchestrator.store.records import Comparison
from orchestrator.store.repo import Store

STATS_MAX_CASES = 2_000  # beyond, a comparison keeps the p10/p90 verdicts (a bootstrap per case costs ~1 ms)
NOISE_FLOOR_WITHIN = "within-run samples only"
NOISE_FLOOR_CALIBRATED = "calibration"

_Key = tuple[str | None, str]  # (host or None when paired on case alone, case_key)
_CALL_VERDICT: dict[str, Verdict] = {
    "slower": "regression",
    "faster": "improvement",
    "within noise": "within noise",
    "noisy": "noisy: not judged",
}


@dataclass(frozen=True, kw_only=True)
class CalibrationRecord:
    """One host, case and metric's A/A noise floor (see ``models.Calibration``); spreads are relative
    (0.02 = 2%)."""

    suite: str
    host: str
    case_key: str
    metric: str
    case: dict[str, Any]
    aa_spread: float | None
    within_spread: float | None
    n_runs: int
    runs: list[str]
    medians: list[float]
    created_at: datetime


def case_samples(store: Store, run_id: str, metric: str, *, by_host: bool = True) -> dict[_Key, list[float]]:
    """Every raw sample of ``metric`` in the run's ok results, per (host, case_key) — per (None, case_key) when
    not ``by_host`` (all hosts of a case together). A result without samples adds nothing."""
    out: dict[_Key, list[float]] = defaultdict(list)
    with store._read() as s:
        rows = s.execute(
            select(Result.host, Result.case_key, Result.samples).where(
                Result.run_id == run_id, Result.status == "ok", Result.samples.is_not(None)
            )
        ).all()
    for host, key, samples in rows:
        xs = (samples or {}).get(metric) if isinstance(samples, dict) else None
        if isinstance(xs, list):
            out[(host if by_host else None, key)].extend(
                float(x) for x in xs if isinstance(x, (int, float)) and not isinstance(x, bool)
            )
    return dict(out)


def sample_counts(store: Store, run_id: str, metric: str, *, by_host: bool = True) -> dict[_Key, int]:
    """How many measurements of ``metric`` the run's ok results hold, per (host, case_key) (per (None, case_key)
    when not ``by_host``): a result's raw sample count, else its metric's stored ``n``, else 1 (a lone value is
    one measurement). Cases without the metric are absent."""
    counts = _result_counts(store, run_id, metric, by_host)
    return {k: sum(1 if n is None else n for n in ns) for k, ns in counts.items()}


def known_sample_counts(store: Store, run_id: str, metric: str, *, by_host: bool = True) -> dict[_Key, int]:
    """As ``sample_counts``, but only where every result of a (host, case_key) says how many measurements it
    holds (raw samples, the metric's ``n``, or a lone value without p10/p90): a result that stored a p10/p90 summary
    without its count makes its case's count unknown (absent), never 1."""
    counts = _result_counts(store, run_id, metric, by_host)
    return {k: sum(n for n in ns if n is not None) for k, ns in counts.items() if None not in ns}


def _result_counts(store: Store, run_id: str, metric: str, by_host: bool) -> dict[_Key, list[int | None]]:
    """Per (host, case_key), each ok result's count of measurements of ``metric``: its raw samples, else its
    metric's ``n``, else 1 for a lone value (no p10/p90), else None (a summary stored without its count)."""
    out: dict[_Key, list[int | None]] = defaultdict(list)
    with store._read() as s:
        rows = s.execute(
            select(Result.host, Result.case_key, Result.metrics, Result.samples).where(
                Result.run_id == run_id, Result.status == "ok"
            )
        ).all()
    for host, key, metrics, samples in rows:
        m = (metrics or {}).get(metric) if isinstance(metrics, dict) else None
        if not isinstance(m, dict):
            continue
        xs = (samples or {}).get(metric) if isinstance(samples, dict) else None
        n = m.get("n")
        count: int | None = None
        if isinstance(xs, list) and xs:
            count = len(xs)
        elif isinstance(n, int) and not isinstance(n, bool) and n > 0:
            count = n
        elif m.get("p10") is None and m.get("p90") is None:
            count = 1  # a lone value, no spread: one measurement (a command suite's `repeat: 1`)
        out[(host if by_host else None, key)].append(count)
    return dict(out)


def metric_samples_kind(store: Store, run_id: str) -> dict[str, str]:
    """Per metric of the run's ok results: ``varies`` when some result stored at least two raw samples of it that
    differ, ``constant`` when every stored sample list holds one value (a count or size the bench reports per
    sample), ``no samples`` when no result stored samples of it (derived figures such as ``activation_bytes``,
    ``weight_bytes``, ``tflops``: computed from the case, not measured)."""
    kinds: dict[str, str] = {}
    with store._read() as s:
        rows = s.execute(
            select(Result.metrics, Result.samples).where(Result.run_id == run_id, Result.status == "ok")
        ).all()
    for metrics, samples in rows:
        for name in metrics or {}:
            kinds.setdefault(name, "no samples")
        for name, xs in (samples or {}).items() if isinstance(samples, dict) else ():
            if not isinstance(xs, list):
                continue
            nums = {float(x) for x in xs if isinstance(x, (int, float)) and not isinstance(x, bool)}
            if len(xs) >= 2 and len(nums) > 1:
                kinds[name] = "varies"
            elif len(xs) >= 2 and kinds.get(name) != "varies":
                kinds[name] = "constant"
    return kinds


def case_medians(store: Store, run_id: str, metric: str) -> dict[tuple[str, str], tuple[float, dict[str, Any]]]:
    """The median of ``metric`` per (host, case_key) of a run's ok results (several results of a case: the
    median of their medians) and the case's parameters."""
    from orchestrator.store import compute

    vals: dict[tuple[str, str], list[float]] = defaultdict(list)
    params: dict[tuple[str, str], dict[str, Any]] = {}
    with store._read() as s:
        rows = s.execute(
            select(Result.host, Result.case_key, Result.case_params, Result.metrics).where(
                Result.run_id == run_id, Result.status == "ok"
            )
        ).all()
    for host, key, case, metrics in rows:
        m = (metrics or {}).get(metric)
        if not isinstance(m, dict):
            continue
        x = m.get("median", m.get("value"))
        if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x):
            vals[(host, key)].append(float(x))
            params.setdefault((host, key), case or {})
    return {k: (compute.median(v), params[k]) for k, v in vals.items()}


def save_calibration(store: Store, suite: str, metric: str, run_ids: Sequence[str]) -> list[CalibrationRecord]:
    """From ``run_ids`` (identical runs of ``suite``, back to back): per (host, case) present in at least two of
    them, the A/A spread of the runs' medians (``stats.aa_spread``) and the widest within-run spread
    (``stats.within_run_spread``); stored, replacing an older calibration of the same host, case and metric."""
    medians = [case_medians(store, rid, metric) for rid in run_ids]
    samples = [case_samples(store, rid, metric) for rid in run_ids]
    keys = sorted({k for m in medians for k in m})
    now = datetime.now(timezone.utc)
    out: list[CalibrationRecord] = []
    with store._write() as s:
        for host, key in keys:
            present = [(rid, m[(host, key)]) for rid, m in zip(run_ids, medians, strict=True) if (host, key) in m]
            if len(present) < 2:
                continue
            meds = [x for _, (x, _) in present]
            within = [w for smp in samples if (w := stats.within_run_spread(smp.get((host, key), []))) is not None]
            rec = CalibrationRecord(
                suite=suite,
                host=host,
                case_key=key,
                metric=metric,
                case=present[0][1][1],
                aa_spread=stats.aa_spread(meds),
                within_spread=max(within) if within else None,
                n_runs=len(present),
                runs=[rid for rid, _ in present],
                medians=meds,
                created_at=now,
            )
            row = s.scalars(
                select(Calibration).where(
                    Calibration.suite == suite,
                    Calibration.host == host,
                    Calibration.case_key == key,
                    Calibration.metric == metric,
                )
            ).one_or_none()
            if row is None:
                row = Calibration(suite=suite, host=host, case_key=key, metric=metric)
                s.add(row)
            row.case_params, row.aa_spread, row.within_spread = rec.case, rec.aa_spread, rec.within_spread
            row.n_runs, row.runs, row.created_at = rec.n_runs, {"ids": rec.runs, "medians": meds}, now
            out.append(rec)
    return out


def calibrations(store: Store, suite: str, metric: str | None = None) -> list[CalibrationRecord]:
    """The stored calibrations of a suite (of one metric when given), by host then case key."""
    q = select(Calibration).where(Calibration.suite == suite)
    if metric is not None:
        q = q.where(Calibration.metric == metric)
    with store._read() as s:
        rows = s.scalars(q.order_by(Calibration.host, Calibration.case_key, Calibration.metric)).all()
        return [
            CalibrationRecord(
                suite=r.suite,
                host=r.host,
                case_key=r.case_key,
                metric=r.metric,
                case=dict(r.case_params or {}),
                aa_spread=r.aa_spread,
                within_spread=r.within_spread,
                n_runs=r.n_runs,
                runs=list((r.runs or {}).get("ids", [])),
                medians=[float(x) for x in (r.runs or {}).get("medians", [])],
                created_at=r.created_at,
            )
            for r in rows
        ]


def _with_sample_counts(store: Store, cmp: Comparison, *, by_host: bool) -> Comparison:
    """``cmp`` with each case's ``n_base``/``n_head`` (``known_sample_counts``), and the verdict ``TOO_FEW``
    (``too few samples: not judged``) where a side holds fewer than ``stats.MIN_SAMPLES``: one measurement has
    no spread, so neither the rank test nor the p10/p90 rule can tell its change from noise (a single head sample
    5% off a base whose p10-p90 spans 20% was called a regression)."""
    nb, nh = (known_sample_counts(store, rid, cmp.metric, by_host=by_host) for rid in (cmp.base, cmp.head))
    cases = []
    for c in cmp.cases:
        key = (c.host if by_host else None, c.case_key)
        n_base, n_head = nb.get(key), nh.get(key)
        few = any(n is not None and n < stats.MIN_SAMPLES for n in (n_base, n_head))
        c = replace(c, n_base=n_base, n_head=n_head)
        cases.append(replace(c, verdict=TOO_FEW, noisy=None) if few else c)
    return replace(cmp, cases=cases, noisy=sum(1 for c in cases if c.noisy))


def with_statistics(store: Store, cmp: Comparison, *, seed: int = stats.SEED) -> Comparison:
    """``cmp`` with every case's ``stats`` (``analysis.stats``: Mann–Whitney U, bootstrap interval of the ratio of
    medians, Benjamini–Hochberg across the cases) from the runs' raw samples, and its ``verdict`` from that call
    (slower → regression, faster → improvement) where the call is not ``n/a``. The noise band of a (host, case)
    is its stored calibration's A/A spread (for the compared metric and the runs' suite), else the within-run
    spread; ``noise_floor`` says which. Over ``STATS_MAX_CASES`` cases, or without samples, ``cmp`` keeps its
    p10/p90 verdicts and ``noise_floor`` says why."""
    by_host = cmp.paired_on == "host+case"
    cmp = _with_sample_counts(store, cmp, by_host=by_host)
    if len(cmp.cases) > STATS_MAX_CASES:
        return replace(cmp, noise_floor=f"not tested: {len(cmp.cases)} cases > {STATS_MAX_CASES}; p10/p90 only")
    base, head = (case_samples(store, rid, cmp.metric, by_host=by_host) for rid in (cmp.base, cmp.head))
    with store._read() as s:
        suite = s.scalar(select(RunRow.suite).where(RunRow.id == cmp.base)) or ""
    cal = {
        (c.host, c.case_key): c.aa_spread
        for c in calibrations(store, suite, cmp.metric)
        if c.aa_spread is not None
    }
    direction = metric_direction(cmp.metric, cmp.unit or "")
    inputs: list[stats.CaseInput] = []
    where: list[int] = []  # index into cmp.cases of each input
    for i, c in enumerate(cmp.cases):
        key = (c.host, c.case_key)
        b, h = base.get(key, []), head.get(key, [])
        if not b or not h or c.verdict == TOO_FEW:
            continue
        calibrated = cal.get((c.host, c.case_key)) if c.host is not None else None
        band, source = stats.noise_band(b, h, calibrated)
        inputs.append((b, h, band, source))
        where.append(i)
    per_case: list[stats.CaseStats | None] = [None] * len(cmp.cases)
    for i, one in zip(where, stats.compare_many(inputs, direction=direction, seed=seed), strict=True):
        per_case[i] = one
    tested = [x for x in per_case if x is not None]
    if not tested:
        few = sum(1 for c in cmp.cases if c.verdict == TOO_FEW)
        if few == len(cmp.cases):
            floor = f"not tested: a side has fewer than {stats.MIN_SAMPLES} samples"
        elif few:
            floor = (
                f"not tested: {few} of {len(cmp.cases)} cases have a side of fewer than {stats.MIN_SAMPLES} samples, "
                "the rest no raw samples stored; p10/p90 only"
            )
        else:
            floor = "no raw samples stored; p10/p90 only"
        return replace(cmp, noise_floor=floor)
    called = iter(stats.call_cases(tested, direction))
    cases = []
    for c, st in zip(cmp.cases, per_case, strict=True):
        if st is None:
            cases.append(c)
            continue
        st = next(called)
        verdict = _CALL_VERDICT.get(st.call, c.verdict)
        # noisy says what the verdict says: a change the test called is not "within the measurement noise" even
        # where the p10-p90 ranges overlap (many samples tell a 6% shift apart); an untestable case keeps p10/p90's
        noisy = c.noisy if st.call == "n/a" else st.call not in ("slower", "faster")
        cases.append(replace(c, stats=st, verdict=verdict, noisy=noisy))
    n_cal = sum(1 for st in tested if st.band_source == "calibration")
    if n_cal == len(tested):
        floor = NOISE_FLOOR_CALIBRATED
    elif n_cal == 0:
        floor = NOISE_FLOOR_WITHIN
    else:
        floor = f"{NOISE_FLOOR_CALIBRATED} for {n_cal} of {len(tested)} cases, within-run samples only for the rest"
    calls = [c.stats.call for c in cases if c.stats is not None]
    slower, faster = calls.count("slower"), calls.count("faster")
    return replace(cmp, cases=cases, noise_floor=floor, slower=slower, faster=faster, alpha=stats.ALPHA,
                   noisy=sum(1 for c in cases if c.noisy))  # fmt: skip
