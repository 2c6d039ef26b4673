"""How a host's end of a run is recorded (real SQLite store): some cases failed -> the run is partial, the host
run keeps its results with the error count — the H200 decode run hit this with C=64 refused for memory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from orchestrator.inventory import parse_inventory
from orchestrator.protocol import Event
from orchestrator.runner import HostOutcome, Runner, RunRequest, _HostRun, run_status
from orchestrator.store.repo import Store
from tests.integration.conftest import hello, result_event


def _runner(tmp_path: Path) -> Runner:
    store = Store.from_url(f"sqlite:///{tmp_path / 'orch.db'}")
    store.upgrade()
    inv = parse_inventory("groups:\n  g:\n    hosts:\n      h1: {connection: local}\n")
    runner = Runner(inv, store, RunRequest("noop", "g"))
    runner.run_id = store.create_run(suite="noop", params={}, preset=None, label=None, hosts=["h1"],
                                     started_by="t@x", started_on="x")  # fmt: skip
    return runner


def _spool(results: int, errors: int, counts: dict[str, int]) -> list[Event]:
    """An agent's spool: a hello of ``results + errors`` cases, a result for each of the first ``results`` cases
    and an error for each of the rest (each case its one outcome), then done with ``counts``."""
    start = hello(0)
    evs = [Event(seq=0, type="hello", data={**start.data, "cases_total": results + errors})]
    for i in range(results):
        ev = result_event(len(evs), 2**i, 1.0)
        evs.append(Event(seq=ev.seq, type="result", ts=ev.ts, data={**ev.data, "case_index": i}))
    evs += [Event(seq=len(evs) + i, type="error", data={"message": "OOM", "case_index": results + i,
                                                           "case": {"M": 9000 + i}})
            for i in range(errors)]  # fmt: skip
    return [*evs, Event(seq=len(evs), type="done", data={"status": "completed", "counts": counts})]


def test_host_with_some_failed_cases_is_partial_and_stored(tmp_path: Path) -> None:
    runner = _runner(tmp_path)
    runner.store.ingest(runner.run_id, "h1", _spool(3, 1, {"lines": 5, "results": 3, "errors": 1}))
    out = asyncio.run(_HostRun(runner, runner.inventory.host("h1")).finish())
    assert (out.status, out.results, out.errors, out.error) == ("partial", 3, 1, "1 case failed: OOM")
    rec = runner.store.get_run(runner.run_id).host_run("h1")
    assert rec is not None and rec.status == "completed" and rec.error == "1 case failed: OOM"
    assert run_status([out]) == "partial"


def test_counts_come_from_the_store_not_from_what_the_follower_saw(tmp_path: Path) -> None:
    runner = _runner(tmp_path)
    runner.store.ingest(runner.run_id, "h1", _spool(2, 0, {"lines": 3, "results": 2, "errors": 0}))
    hr = _HostRun(runner, runner.inventory.host("h1"))
    hr.results, hr.errors = 11, 1  # a follower's tally that disagrees with the store
    out = asyncio.run(hr.finish())
    assert (out.status, out.results, out.errors, out.error) == ("completed", 2, 0, None)


@pytest.mark.parametrize(
    ("counts", "message"),
    [
        ({"lines": 5, "results": 4, "errors": 0}, "4 results on the host, 3 stored; 0 errors on the host, 1 stored"),
        ({"lines": 7, "results": 3, "errors": 1}, "7 lines on the host before done, 5 stored"),
        ({"results": 3}, "no count of errors on the host, 1 stored"),
    ],
)
def test_agent_counts_that_disagree_with_the_store_fail_the_host(
    tmp_path: Path, counts: dict[str, int], message: str
) -> None:
    runner = _runner(tmp_path)
    runner.store.ingest(runner.run_id, "h1", _spool(3, 1, counts))
    out = asyncio.run(_HostRun(runner, runner.inventory.host("h1")).finish())
    assert out.status == "failed" and out.results == 3 and message in (out.error or "")
    rec = runner.store.get_run(runner.run_id).host_run("h1")
    assert rec is not None and rec.status == "failed" and message in (rec.error or "")
    assert run_status([out]) == "partial"  # results were stored: the run is partial, not completed


def test_a_host_without_a_stored_done_line_is_failed(tmp_path: Path) -> None:
    runner = _runner(tmp_path)
    runner.store.ingest(runner.run_id, "h1", _spool(2, 0, {})[:-1])
    out = asyncio.run(_HostRun(runner, runner.inventory.host("h1")).finish())
    assert out.status == "failed" and "done line was not stored" in (out.error or "")


def test_run_status_rules() -> None:
    def o(status: str, results: int = 1) -> HostOutcome:
        return HostOutcome("h", status, results)

    assert run_status([o("completed"), o("completed")]) == "completed"
    assert run_status([o("completed"), o("failed", 0)]) == "partial"
    assert run_status([o("failed", 0), o("failed", 0)]) == "failed"
    assert run_status([o("completed"), o("cancelled")]) == "cancelled"
    assert run_status([o("partial")]) == "partial"
