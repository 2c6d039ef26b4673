"""Projections stored by ``orch project``: list (filter by source run, target GPU) and one by id."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from orchestrator.api.deps import RUN_ID_PATTERN, RUN_REF_HELP, Limit, Offset, StoreDep, resolve_run_ref
from orchestrator.api.schemas import ProjectionOut, ProjectionPage
from orchestrator.store.projections import get_projection, list_projections

router = APIRouter(tags=["projections"])
GpuKey = Annotated[str | None, Query(max_length=64, pattern=r"^[a-z0-9][a-z0-9-]*$", description="catalog key")]


@router.get("/projections", response_model=ProjectionPage)
def projections(
    store: StoreDep,
    run: Annotated[str | None, Query(max_length=200, description="the source run: " + RUN_REF_HELP)] = None,
    target: GpuKey = None,
    limit: Limit = 50,
    offset: Offset = 0,
) -> ProjectionPage:
    run_id = resolve_run_ref(store, run, "run") if run is not None else None
    page = list_projections(store, source_run_id=run_id, target_gpu=target, limit=limit, offset=offset)
    items = [ProjectionOut.model_validate(p) for p in page.items]
    return ProjectionPage(total=page.total, limit=page.limit, offset=page.offset, items=items)


@router.get("/projections/{projection_id}", response_model=ProjectionOut)
def projection(
    store: StoreDep, projection_id: Annotated[str, Path(pattern=RUN_ID_PATTERN, description="projection id")]
) -> ProjectionOut:
    return ProjectionOut.model_validate(get_projection(store, projection_id))
