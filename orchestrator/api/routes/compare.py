"""``GET /api/v1/compare?base=&head=``: per-case ratio of medians head/base and the geometric mean."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from orchestrator.api.deps import NAME_PATTERN, RUN_ID_PATTERN, StoreDep, record_response
from orchestrator.api.schemas import ComparisonOut

router = APIRouter(tags=["compare"])


@router.get("/compare", response_model=ComparisonOut)
def compare(
    store: StoreDep,
    base: Annotated[str, Query(pattern=RUN_ID_PATTERN)],
    head: Annotated[str, Query(pattern=RUN_ID_PATTERN)],
    metric: Annotated[
        str | None, Query(pattern=NAME_PATTERN, description="default time_ms, else the first")
    ] = None,
) -> Response:
    return record_response(store.compare(base, head, metric=metric))
