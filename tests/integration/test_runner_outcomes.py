"""How a host's end of a run is recorded (real SQLite store): some cases failed -> the run is partial, the host
run keeps its results with the error count — the H200 decode run hit this with C=64 refused for memory."""

from __future__ import annotations

import asyncio
from pathlib import Path

from orchestrator.inventory import parse_inventory
from orchestrator.runner import HostOutcome, Runner, RunRequest, _HostRun, run_status
from orchestrator.store.repo import Store


def test_host_with_some_failed_cases_is_partial_and_stored(tmp_path: Path) -> None:
    store = Store.from_url(f"sqlite:///{tmp_path / 'orch.db'}")
    store.upgrade()
    inv = parse_inventory("groups:\n  g:\n    hosts:\n      h1: {connection: local}\n")
    runner = Runner(inv, store, RunRequest("noop", "g"))
    runner.run_id = store.create_run(suite="noop", params={}, preset=None, label=None, hosts=["h1"],
                                     started_by="t@x", started_on="x")  # fmt: skip
    hr = _HostRun(runner, inv.host("h1"))
    hr.results, hr.errors = 3, 1
    out = asyncio.run(hr.finish("completed"))
    assert (out.status, out.results, out.errors, out.error) == ("partial", 3, 1, "1 case(s) failed")
    rec = store.get_run(runner.run_id).host_run("h1")
    assert rec is not None and rec.status == "completed" and rec.error == "1 case(s) failed"
    assert run_status([out]) == "partial"


def test_run_status_rules() -> None:
    def o(status: str, results: int = 1) -> HostOutcome:
        return HostOutcome("h", status, results)

    assert run_status([o("completed"), o("completed")]) == "completed"
    assert run_status([o("completed"), o("failed", 0)]) == "partial"
    assert run_status([o("failed", 0), o("failed", 0)]) == "failed"
    assert run_status([o("completed"), o("cancelled")]) == "cancelled"
    assert run_status([o("partial")]) == "partial"
