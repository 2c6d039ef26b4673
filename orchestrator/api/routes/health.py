"""``GET /healthz``: 200 when the process is up, the database answers and its schema is at this orch's head.

Anything else is a 503 with a generic body: why (unreachable, wrong password, unmigrated, migrated by a newer
orch) goes to the server log, with the URL's credentials removed, never to the unauthenticated caller.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, HTTPException

from orchestrator.api.deps import StoreDep
from orchestrator.api.schemas import Detail, Health, VersionOut
from orchestrator.errors import StoreError
from orchestrator.store import migrate
from orchestrator.version import version_info

router = APIRouter(tags=["health"])
log = logging.getLogger("orch.api")
UNHEALTHY = "database unavailable or not at this orch's schema"


@router.get("/healthz", response_model=Health, responses={503: {"model": Detail}})
def healthz(store: StoreDep) -> Health:
    try:
        revision = migrate.check_at_head(store.engine)
    except StoreError as exc:
        log.warning("/healthz: %s (%s)", exc.message, exc.hint)
        raise HTTPException(503, UNHEALTHY) from None
    return Health(
        status="ok", database=store.dialect, schema_revision=revision, orch=VersionOut(**version_info().as_dict())
    )
