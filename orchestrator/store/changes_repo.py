"""The ``change_points`` table's queries (``orch runs changes``, ``/api/v1/changes``), apart from ``repo.py``:
a metric's history per (host, case) of a suite, change points found in it by ``analysis.changes`` (Apache
Otava), stored so the dashboard can mark the runs where a series changed."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import delete, select

from orchestrator.analysis import changes
from orchestrator.store import compute, known
from orchestrator.store.models import ChangePoint, Result
from orchestrator.store.models import Run as RunRow
from orchestrator.store.repo import Store, check_name

HISTORY_MAX_RUNS = 5_000  # newest runs of a suite read per series (older ones are left out of the history)


@dataclass(frozen=True, kw_only=True)
class ChangePointRecord:
    """One change in a (suite, host, case, metric) series: ``run_id`` is the first run after it (started at
    ``run_started_at``; ``position`` its index in the series), ``before``/``after`` the segment means in the
    metric's unit, ``change`` = after / before − 1, ``p_value`` Otava's t-test of the split."""

    suite: str
    host: str
    case_key: str
    case: dict[str, Any]
    metric: str
    run_id: str
    run_started_at: datetime
    position: int
    before: float
    after: float
    change: float | None
    p_value: float | None
    detected_at: datetime


@dataclass(frozen=True, kw_only=True)
class ChangesReport:
    """What ``detect_changes`` looked at (``series`` analysed, ``points`` in them) and the change points found."""

    suite: str
    metric: str
    series: int
    points: int
    changes: list[ChangePointRecord] = field(default_factory=list)


@dataclass(frozen=True)
class _Point:
    run_id: str
    started_at: datetime
    value: float


def history(
    store: Store, suite: str, metric: str, *, host: str | None = None
) -> tuple[dict[tuple[str, str], list[_Point]], dict[str, dict[str, Any]]]:
    """Per (host, case_key): one point per run (the median of the run's ok results of that case, median else
    value of ``metric``), oldest run first; and each case key's parameters."""
    check_name("metric", metric)
    center = Result.metrics[(metric, "median")].as_float()
    value = Result.metrics[(metric, "value")].as_float()
    conds = [RunRow.suite == suite, Result.status == "ok"]
    if host is not None:
        conds.append(Result.host == host)
    with store._read() as s:
        runs = select(RunRow.id).where(RunRow.suite == suite).order_by(RunRow.started_at.desc()).limit(
            HISTORY_MAX_RUNS
        )
        rows = s.execute(
            select(Result.host, Result.case_key, Result.case_params, RunRow.id, RunRow.started_at, center, value)
            .join(RunRow, RunRow.id == Result.run_id)
            .where(*conds, Result.run_id.in_(runs))
        ).all()
        if all(r[-2] is None and r[-1] is None for r in rows):  # no run of the suite, or no result has metric
            known.check_suite_metric(s, suite, metric, None if host is None else Result.host == host, host)
    vals: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    started: dict[str, datetime] = {}
    cases: dict[str, dict[str, Any]] = {}
    for h, key, params, rid, at, med, val in rows:
        x = med if med is not None else val
        if x is None or not math.isfinite(float(x)):
            continue
        vals[(h, key, rid)].append(float(x))
        started[rid] = at
        cases.setdefault(key, params or {})
    series: dict[tuple[str, str], list[_Point]] = defaultdict(list)
    for (h, key, rid), xs in vals.items():
        series[(h, key)].append(_Point(rid, started[rid], compute.median(xs)))
    for pts in series.values():
        pts.sort(key=lambda p: (p.started_at, p.run_id))
    return dict(series), cases


def detect_changes(
    store: Store,
    suite: str,
    metric: str,
    *,
    host: str | None = None,
    min_change: float = changes.MIN_MAGNITUDE,
    max_pvalue: float = changes.MAX_PVALUE,
) -> ChangesReport:
    """Find the change points of every (host, case) series of ``suite``/``metric`` (of one host when given) and
    store them, replacing what was stored for those series. Raises UsageError for an invalid metric name, and
    (``known``) for a suite without stored runs, a host or a metric none of its results has."""
    series, cases = history(store, suite, metric, host=host)
    now = datetime.now(timezone.utc)
    found: list[ChangePointRecord] = []
    for (h, key), pts in sorted(series.items()):
        for c in changes.change_points([p.value for p in pts], max_pvalue=max_pvalue, min_magnitude=min_change):
            p = pts[c.index]
            found.append(
                ChangePointRecord(
                    suite=suite, host=h, case_key=key, case=cases[key], metric=metric, run_id=p.run_id,
                    run_started_at=p.started_at, position=c.index, before=c.before, after=c.after, change=c.change,
                    p_value=c.p_value, detected_at=now,
                )
            )  # fmt: skip
    with store._write() as s:
        for h, key in series:
            s.execute(
                delete(ChangePoint).where(
                    ChangePoint.suite == suite,
                    ChangePoint.metric == metric,
                    ChangePoint.host == h,
                    ChangePoint.case_key == key,
                )
            )
        for r in found:
            s.add(
                ChangePoint(
                    suite=r.suite, host=r.host, case_key=r.case_key, metric=r.metric, case_params=r.case,
                    run_id=r.run_id, run_started_at=r.run_started_at, position=r.position, before=r.before,
                    after=r.after, change=r.change, p_value=r.p_value, detected_at=r.detected_at,
                )
            )  # fmt: skip
    return ChangesReport(
        suite=suite, metric=metric, series=len(series), points=sum(len(p) for p in series.values()), changes=found
    )


def stored_changes(
    store: Store,
    *,
    suite: str | None = None,
    metric: str | None = None,
    host: str | None = None,
    run_id: str | None = None,
    limit: int = 1000,
) -> list[ChangePointRecord]:
    """Stored change points, newest run first, filtered by any of suite, metric, host and run. Raises
    UsageError, when none is found, for a suite with no stored run, a host none of its results was measured on,
    or a metric none of its results has."""
    q = select(ChangePoint)
    if suite is not None:
        q = q.where(ChangePoint.suite == suite)
    if metric is not None:
        q = q.where(ChangePoint.metric == check_name("metric", metric))
    if host is not None:
        q = q.where(ChangePoint.host == host)
    if run_id is not None:
        q = q.where(ChangePoint.run_id == run_id)
    q = q.order_by(ChangePoint.run_started_at.desc(), ChangePoint.host, ChangePoint.case_key).limit(limit)
    with store._read() as s:
        found = [
            ChangePointRecord(
                suite=r.suite, host=r.host, case_key=r.case_key, case=dict(r.case_params or {}), metric=r.metric,
                run_id=r.run_id, run_started_at=r.run_started_at, position=r.position, before=r.before,
                after=r.after, change=r.change, p_value=r.p_value, detected_at=r.detected_at,
            )  # fmt: skip
            for r in s.scalars(q)
        ]
        if not found and suite is not None:
            known.check_suite(s, suite)
            if host is not None:
                known.check_host(s, suite, host)
            if metric is not None:
                known.check_metric(s, suite, metric)
        return found
