"""The ``projections`` table's queries (``orch project``; ``/api/v1/projections``) — kept apart from
``repo.py``'s run/result queries."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import func, select

from orchestrator.errors import NotFoundError
from orchestrator.store import compute
from orchestrator.store.models import Projection
from orchestrator.store.records import Page
from orchestrator.store.repo import Store


@dataclass(frozen=True, kw_only=True)
class ProjectionRecord:
    id: str
    created_at: datetime
    source_run_id: str
    overheads_run_id: str | None
    check_run_id: str | None
    source_gpu: str
    target_gpu: str
    dtype: str
    params: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, Any] = field(default_factory=dict)
    rows: dict[str, Any] = field(default_factory=dict)


def _record(p: Projection) -> ProjectionRecord:
    return ProjectionRecord(
        id=p.id,
        created_at=p.created_at,
        source_run_id=p.source_run_id,
        overheads_run_id=p.overheads_run_id,
        check_run_id=p.check_run_id,
        source_gpu=p.source_gpu,
        target_gpu=p.target_gpu,
        dtype=p.dtype,
        params=dict(p.params),
        inputs=dict(p.inputs),
        rows=dict(p.rows),
    )


def save_projection(
    store: Store,
    *,
    source_run_id: str,
    overheads_run_id: str | None,
    check_run_id: str | None,
    source_gpu: str,
    target_gpu: str,
    dtype: str,
    params: dict[str, Any],
    inputs: dict[str, Any],
    rows: dict[str, Any],
) -> ProjectionRecord:
    """Store one projection; returns it with its new id (UUIDv7, time-sortable)."""
    row = Projection(
        id=compute.uuid7(),
        created_at=datetime.now(timezone.utc),
        source_run_id=source_run_id,
        overheads_run_id=overheads_run_id,
        check_run_id=check_run_id,
        source_gpu=source_gpu,
        target_gpu=target_gpu,
        dtype=dtype,
        params=params,
        inputs=inputs,
        rows=rows,
    )
    with store._write() as s:
        s.add(row)
        s.flush()
        return _record(row)


def list_projections(
    store: Store, *, source_run_id: str | None = None, target_gpu: str | None = None, limit: int = 50, offset: int = 0
) -> Page[ProjectionRecord]:
    """Projections, newest first, optionally of one source run and/or one target GPU key."""
    q = select(Projection)
    if source_run_id is not None:
        q = q.where(Projection.source_run_id == source_run_id)
    if target_gpu is not None:
        q = q.where(Projection.target_gpu == target_gpu)
    with store._read() as s:
        total = s.scalar(select(func.count()).select_from(q.subquery())) or 0
        items = s.scalars(q.order_by(Projection.created_at.desc(), Projection.id.desc()).limit(limit).offset(offset))
        return Page(items=[_record(p) for p in items], total=total, limit=limit, offset=offset)


def get_projection(store: Store, projection_id: str) -> ProjectionRecord:
    """One projection. Raises NotFoundError."""
    with store._read() as s:
        p = s.get(Projection, projection_id)
        if p is None:
            raise NotFoundError(f"no projection {projection_id!r}", "GET /api/v1/projections lists the stored ones")
        return _record(p)
