"""``GET /api/v1/series``: points ready for a plot — x a case parameter, y a metric's median with p10/p90."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response

from orchestrator.api.deps import NAME_PATTERN, TEXT_PATTERN, RunRefQuery, StoreDep, record_response, resolve_run_ref
from orchestrator.api.schemas import SeriesOut

router = APIRouter(tags=["series"])


@router.get("/series", response_model=SeriesOut)
def series(
    store: StoreDep,
    suite: Annotated[str, Query(min_length=1, max_length=128, pattern=TEXT_PATTERN)],
    metric: Annotated[str, Query(pattern=NAME_PATTERN, description="e.g. time_ms, gbps")] = "time_ms",
    x: Annotated[str, Query(pattern=NAME_PATTERN, description="case parameter, e.g. M")] = "M",
    host: Annotated[list[str], Query(max_length=100, description="repeatable; default all hosts")] = [],  # noqa: B006
    run: RunRefQuery | None = None,
    group_by: Annotated[Literal["host", "run"], Query(description="host: latest run per host")] = "host",
    limit: Annotated[int, Query(ge=1, le=200, description="max lines when group_by=run")] = 50,
) -> Response:
    run_id = resolve_run_ref(store, run, "run") if run is not None else None
    s = store.series(
        suite=suite, metric=metric, x=x, hosts=host, run_id=run_id, group_by=group_by, max_lines=limit
    )
    return record_response(s)
