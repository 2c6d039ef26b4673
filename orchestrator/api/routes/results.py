"""``GET /api/v1/runs/{id}/results``: a run's results (metrics with statistics, % of the measured roof)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response

from orchestrator.api.deps import Offset, RunId, StoreDep, Text, json_response
from orchestrator.api.schemas import ResultOut, ResultPage

router = APIRouter(tags=["results"])


@router.get("/runs/{run_id}/results", response_model=ResultPage)
def run_results(
    store: StoreDep,
    run_id: RunId,
    host: Text = None,
    status: Annotated[Literal["ok", "error"] | None, Query()] = None,
    samples: Annotated[bool, Query(description="include raw samples")] = False,
    limit: Annotated[int, Query(ge=1, le=10_000, description="page size; default 200")] = 200,
    offset: Offset = 0,
) -> Response:
    page = store.results(run_id, host=host, status=status, limit=limit, offset=offset, samples=samples)
    items = [ResultOut.model_validate(r) for r in page.items]
    return json_response(
        ResultPage(run_id=run_id, total=page.total, limit=page.limit, offset=page.offset, items=items)
    )
