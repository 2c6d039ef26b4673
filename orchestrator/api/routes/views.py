"""The dashboard's plot data and flags: ``GET /api/v1/views`` (the headline views of runs, overlaid — the same
function as ``orch runs plot``), ``GET /api/v1/resolve`` (a run reference as the CLI takes it -> the run) and
``GET /api/v1/runs/{id}/flags`` (cases whose GPU telemetry saw throttling or another process, and the fleet
differences the run started with)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from orchestrator.api.deps import (
    NAME_PATTERN,
    RunId,
    RunRefQuery,
    StoreDep,
    record_response,
    resolve_run_ref,
    suite_registry,
)
from orchestrator.api.schemas import RunSummaryOut
from orchestrator.api.schemas_views import RunFlagsOut, ViewsOut
from orchestrator.views_service import MAX_RUNS, run_views

router = APIRouter(tags=["views"])


@router.get("/views", response_model=ViewsOut)
def views(
    request: Request,
    store: StoreDep,
    run: Annotated[list[str], Query(min_length=1, max_length=MAX_RUNS, description="repeatable: runs overlaid")],
    metric: Annotated[str | None, Query(pattern=NAME_PATTERN, description="one metric; default the headline")] = None,
    x: Annotated[str | None, Query(pattern=NAME_PATTERN, description="case parameter on x; default the sweep")] = None,
) -> Response:
    ids = [resolve_run_ref(store, ref, "run") for ref in run]
    return record_response(run_views(store, ids, registry=suite_registry(request), metric=metric, x=x))


@router.get("/resolve", response_model=RunSummaryOut)
def resolve(store: StoreDep, ref: RunRefQuery) -> RunSummaryOut:
    return RunSummaryOut.model_validate(store.get_run(resolve_run_ref(store, ref, "ref")))


@router.get("/runs/{run_id}/flags", response_model=RunFlagsOut)
def flags(store: StoreDep, run_id: RunId) -> RunFlagsOut:
    cases = store.flagged_cases(run_id)
    fleet: Any = (store.get_run(run_id).info or {}).get("fleet")
    diffs = [d for d in (fleet.get("differences") or []) if isinstance(d, dict)] if isinstance(fleet, dict) else []
    return RunFlagsOut.model_validate({"run_id": run_id, "cases": [c.__dict__ for c in cases],
                                       "fleet_differences": diffs})  # fmt: skip
