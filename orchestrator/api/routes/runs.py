"""Runs: list (filtered, paginated with a total), one run with its host runs, relabel, delete."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request, Response

from orchestrator.api.deps import Limit, Offset, RunId, StoreDep, Text, as_utc, require_write, suite_registry
from orchestrator.api.schemas import LabelIn, RunDetailOut, RunPage, RunSummaryOut
from orchestrator.errors import UsageError
from orchestrator.store.records import RunFilter

router = APIRouter(tags=["runs"])
Status = Literal["pending", "running", "completed", "partial", "failed", "cancelled"]


@router.get("/runs", response_model=RunPage)
def list_runs(
    request: Request,
    store: StoreDep,
    suite: Text = None,
    host: Text = None,
    status: Annotated[Status | None, Query()] = None,
    label: Text = None,
    since: Annotated[
        datetime | None, Query(description="started at or after (ISO 8601; naive = UTC)")
    ] = None,
    until: Annotated[datetime | None, Query(description="started before (ISO 8601; naive = UTC)")] = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> RunPage:
    f = RunFilter(
        suite=suite, host=host, status=status, label=label, since=as_utc(since), until=as_utc(until)
    )
    page = store.list_runs(f, limit=limit, offset=offset)
    if suite is not None and page.total == 0:
        known = set(store.stored_suites()) | set(suite_registry(request).names())
        if suite not in known:  # an empty page for a typo would read as "no runs yet"
            raise UsageError(f"suite {suite!r} is neither a known suite nor one with stored runs",
                             f"suites: {', '.join(sorted(known))}")  # fmt: skip
    items = [RunSummaryOut.model_validate(r) for r in page.items]
    return RunPage(total=page.total, limit=page.limit, offset=page.offset, items=items)


@router.get("/runs/{run_id}", response_model=RunDetailOut)
def get_run(store: StoreDep, run_id: RunId) -> RunDetailOut:
    return RunDetailOut.model_validate(store.get_run(run_id))


@router.post("/runs/{run_id}/label", response_model=RunSummaryOut, dependencies=[Depends(require_write)])
def set_label(store: StoreDep, run_id: RunId, body: LabelIn) -> RunSummaryOut:
    return RunSummaryOut.model_validate(store.set_label(run_id, body.label))


@router.delete("/runs/{run_id}", status_code=204, dependencies=[Depends(require_write)])
def delete_run(store: StoreDep, run_id: RunId) -> Response:
    store.delete_run(run_id)
    return Response(status_code=204)
