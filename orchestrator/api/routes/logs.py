"""A command suite's full outputs, fetched from the hosts that kept them (``orchestrator.runlogs``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Request

from orchestrator.api.deps import RunId, StoreDep, Text
from orchestrator.api.schemas import RunLogsOut
from orchestrator.errors import InventoryError, SelectionError

router = APIRouter(tags=["runs"])


@router.get("/runs/{run_id}/logs", response_model=RunLogsOut)
async def run_logs(
    request: Request, store: StoreDep, run_id: RunId, host: Text = None,
    case: Annotated[int | None, Query(ge=0, description="case index in the run (default: every case)")] = None,
) -> RunLogsOut:  # fmt: skip
    """Full stdout/stderr/output of each timed run, read on the hosts over SSH (the server's ``ORCH_INVENTORY``
    names them); results only carry excerpts, sizes and sha256, which every fetched file is checked against.
    A host that cannot answer, or whose outputs are gone or changed (``missing``, ``problems``), has ``error`` set.
    400, as ``orch runs logs`` exits 2: a run of a suite that runs no command, a ``case`` past the run's cases."""
    from orchestrator.inventory import load_inventory
    from orchestrator.runlogs import check_case, check_keeps_outputs, fetch_logs
    from orchestrator.store.outputs_repo import stored_outputs

    detail = store.get_run(run_id)
    check_keeps_outputs(detail.id, detail.suite)  # UsageError: 400, before any host is asked
    check_case(detail.id, case, [h.cases_total for h in detail.host_runs if host in (None, h.host)], option="case")
    stored = stored_outputs(store, detail.id, host)
    try:
        inventory = load_inventory(request.app.state.settings.inventory)
        hosts = await fetch_logs(inventory, detail.id, list(detail.hosts), host=host, case=case, suite=detail.suite,
                                 stored=stored)  # fmt: skip
    except (InventoryError, SelectionError) as exc:
        raise HTTPException(503, f"this server cannot reach the run's hosts: {exc.message}") from None
    return RunLogsOut.model_validate({"run_id": detail.id, "hosts": [h.to_dict() for h in hosts]})
