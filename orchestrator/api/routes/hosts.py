"""``GET /api/v1/hosts``: every host the store has seen, with its latest facts."""

from __future__ import annotations

from fastapi import APIRouter

from orchestrator.api.deps import StoreDep
from orchestrator.api.schemas import HostOut

router = APIRouter(tags=["hosts"])


@router.get("/hosts", response_model=list[HostOut])
def list_hosts(store: StoreDep) -> list[HostOut]:
    return [HostOut.model_validate(h) for h in store.list_hosts()]
