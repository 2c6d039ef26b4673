"""``GET /api/v1/changes``: stored change points of metric histories (``orch runs changes`` finds and stores
them with Apache Otava), newest run first — what the dashboard marks on a series."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from orchestrator.api.deps import NAME_PATTERN, RUN_REF_HELP, TEXT_PATTERN, StoreDep, resolve_run_ref
from orchestrator.api.schemas import ChangePointOut
from orchestrator.store.changes_repo import stored_changes

router = APIRouter(tags=["changes"])


@router.get("/changes", response_model=list[ChangePointOut])
def changes(
    store: StoreDep,
    suite: Annotated[str | None, Query(min_length=1, max_length=128, pattern=TEXT_PATTERN)] = None,
    metric: Annotated[str | None, Query(pattern=NAME_PATTERN)] = None,
    host: Annotated[str | None, Query(min_length=1, max_length=255, pattern=TEXT_PATTERN)] = None,
    run: Annotated[
        str | None, Query(max_length=200, description="the first run after the change: " + RUN_REF_HELP)
    ] = None,
    limit: Annotated[int, Query(ge=1, le=10_000, description="most change points returned")] = 1000,
) -> list[ChangePointOut]:
    run_id = resolve_run_ref(store, run, "run") if run is not None else None
    found = stored_changes(store, suite=suite, metric=metric, host=host, run_id=run_id, limit=limit)
    return [ChangePointOut.model_validate(c) for c in found]
