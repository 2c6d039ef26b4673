"""``GET /healthz``: the process is up and the database answers."""

from __future__ import annotations

from fastapi import APIRouter

from orchestrator.api.deps import StoreDep
from orchestrator.api.schemas import Detail, Health

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health, responses={503: {"model": Detail}})
def healthz(store: StoreDep) -> Health:
    return Health(status="ok", database=store.dialect, schema_revision=store.schema_revision())
