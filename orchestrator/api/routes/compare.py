"""``GET /api/v1/compare?base=&head=``: per-case ratio of medians head/base, noise and verdict, geometric mean."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from orchestrator.api.deps import NAME_PATTERN, RunRefQuery, StoreDep, record_response, resolve_run_ref
from orchestrator.api.schemas import ComparisonOut, Detail

router = APIRouter(tags=["compare"])
_INCOMPARABLE: dict[int | str, dict[str, Any]] = {
    422: {"model": Detail, "description": "an invalid query, or runs of different suites or with no shared case"}
}


@router.get("/compare", response_model=ComparisonOut, responses=_INCOMPARABLE)
def compare(
    store: StoreDep,
    base: RunRefQuery,
    head: RunRefQuery,
    metric: Annotated[
        str | None, Query(pattern=NAME_PATTERN, description="default time_ms, else the first")
    ] = None,
) -> Response:
    base, head = resolve_run_ref(store, base, "base"), resolve_run_ref(store, head, "head")
    return record_response(store.compare(base, head, metric=metric))
