"""What the store holds, for naming the known ones when a query names an unknown suite or metric.

Called only on the empty path of a query (no run of the suite, or no point of the metric), so a query that finds
data pays nothing. An unknown name is a UsageError (CLI exit 2, API 400) listing what is stored, as ``/views``
already does, instead of an empty answer that reads like "no data yet".
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from orchestrator.errors import UsageError
from orchestrator.store.models import Result
from orchestrator.store.models import Run as RunRow

#: Results whose metric names are read to list the stored metrics (the names repeat from result to result).
METRIC_SAMPLE = 2000
SHOWN = 30


def _listed(names: list[str]) -> str:
    head = ", ".join(names[:SHOWN])
    return (head + f" ... ({len(names)} in all)" if len(names) > SHOWN else head) or "none"


def check_suite(s: Session, suite: str) -> None:
    """Raise UsageError when no run of ``suite`` is stored, listing the stored suites."""
    if s.scalar(select(RunRow.id).where(RunRow.suite == suite).limit(1)) is not None:
        return
    suites = sorted(s.scalars(select(RunRow.suite).distinct()).all())
    raise UsageError(f"no run of suite {suite!r} is stored", f"suites with stored runs: {_listed(suites)}")


def check_metric(s: Session, suite: str, metric: str, where: ColumnElement[bool] | None = None) -> None:
    """Raise UsageError when no ok result of ``suite`` (restricted by ``where``) has ``metric``, listing the
    metric names of up to METRIC_SAMPLE of those results."""
    q = select(Result.metrics).join(RunRow, RunRow.id == Result.run_id)
    q = q.where(RunRow.suite == suite, Result.status == "ok")
    if where is not None:
        q = q.where(where)
    names: set[str] = set()
    for metrics in s.scalars(q.limit(METRIC_SAMPLE)):
        if isinstance(metrics, dict):
            names.update(str(k) for k in metrics)
    if metric in names or not names:
        return  # no ok result at all: nothing to compare the name with, the empty answer is the truth
    raise UsageError(f"no result of suite {suite!r} has metric {metric!r}", f"metrics stored: {_listed(sorted(names))}")


def check_host(s: Session, suite: str, host: str) -> None:
    """Raise UsageError when no ok result of ``suite`` was measured on ``host``, listing the hosts that have
    one (none at all: nothing to compare the name with, the empty answer is the truth)."""
    q = select(Result.host).join(RunRow, RunRow.id == Result.run_id)
    q = q.where(RunRow.suite == suite, Result.status == "ok")
    if s.scalar(q.where(Result.host == host).limit(1)) is not None:
        return
    hosts = sorted(s.scalars(q.distinct()).all())
    if hosts:
        raise UsageError(
            f"no result of suite {suite!r} was measured on host {host!r}", f"hosts with results: {_listed(hosts)}"
        )


def check_suite_metric(s: Session, suite: str, metric: str, where: Any = None, host: str | None = None) -> None:
    """``check_suite``, then ``check_host`` for ``host`` when given, then ``check_metric`` (within ``where``)."""
    check_suite(s, suite)
    if host is not None:
        check_host(s, suite, host)
    check_metric(s, suite, metric, where)
