"""A case whose output orch's parser judged an error (nccl-tests wrong elements, a malformed -J file, failed: -3)
leaves its host ``partial``, not ``failed``: the agent counted a result, the store holds an error row that says
so (``info.agent_result``), and the reconciliation counts it on the agent's side — on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orchestrator.ingest import done_record, host_verdict
from orchestrator.protocol import Event
from orchestrator.store.repo import Store
from orchestrator.suites.command import command_result
from orchestrator.suites.loader import load_registry

FIX = Path(__file__).parents[1] / "fixtures" / "nccl-tests"
GOOD = (FIX / "all_reduce_perf_8xh200.txt").read_text()
WRONG = (FIX / "all_reduce_perf_wrong.txt").read_text()
MIB = 1048576


def _result(seq: int, index: int, text: str) -> Event:
    case = {"size_bytes": MIB, "gpus": 8, "binary": "x", "argv": ["x"], "env": {}, "timeout_s": 60.0}
    return Event(seq=seq, type="result", data={
        "case_index": index, "case": case, "metrics": {"wall_ms": {"value": 9.0, "unit": "ms"}},
        "info": {"stdout": text, "exit_status": 0},
    })  # fmt: skip


def _events(agent_error: bool) -> list[Event]:
    suite = load_registry().get("nccl-allreduce-text").command
    assert suite is not None
    evs = [command_result(suite, _result(i, i, text), "b300") for i, text in enumerate([GOOD, WRONG, GOOD])]
    results, errors = 3, 0
    if agent_error:  # an error the agent itself wrote (its tool exited non-zero): not a judged one
        evs.append(Event(seq=3, type="error", data={"case_index": 3, "case": {"size_bytes": MIB},
                                                     "message": "exit 1", "info": {"exit_status": 1}}))  # fmt: skip
        errors = 1
    n = len(evs)
    counts = {"lines": n, "results": results, "errors": errors}
    evs.append(Event(seq=n, type="done", data={"status": "completed", "counts": counts}))
    return evs


def _stored(store: Store, agent_error: bool) -> tuple[str, Any]:
    rid = store.create_run(suite="nccl-allreduce-text", params={}, preset=None, label=None, hosts=["h1"],
                           started_by="t@box", started_on="box")  # fmt: skip
    store.start_host_run(rid, "h1", facts={}, agent_version="v", build_sha=None)
    store.ingest(rid, "h1", _events(agent_error))
    rec = store.get_host_run(rid, "h1")
    assert rec is not None
    return rid, rec


def test_a_judged_case_leaves_the_host_partial(store: Store) -> None:
    rid, rec = _stored(store, agent_error=False)
    assert (rec.results, rec.errors) == (2, 1)
    assert store.judged_errors(rid, "h1") == 1
    (row,) = [r for r in store.results(rid, limit=10).items if r.status == "error"]
    assert row.info is not None and row.info["agent_result"] is True and row.info["error_kind"] == "invalid"
    assert "nccl-tests line 19 (size 1048576 B): #wrong is 12" in (row.error or "")
    v = host_verdict(rec.done_counts, results=rec.results, errors=rec.errors, judged=1)
    assert (v.status, v.error) == ("partial", "1 case failed")
    # without counting it, the store seemed to have lost a result: the host was 'failed'
    lost = host_verdict(rec.done_counts, results=rec.results, errors=rec.errors)
    assert lost.status == "failed" and "3 results on the host, 2 stored" in (lost.error or "")


def test_an_agents_own_error_is_not_judged(store: Store) -> None:
    rid, rec = _stored(store, agent_error=True)
    assert (rec.results, rec.errors) == (2, 2)
    assert store.judged_errors(rid, "h1") == 1
    v = host_verdict(rec.done_counts, results=rec.results, errors=rec.errors, judged=1)
    assert (v.status, v.error) == ("partial", "2 cases failed")


def test_a_judged_count_cannot_hide_a_lost_line() -> None:
    done = done_record(Event(seq=4, type="done", data={"counts": {"lines": 4, "results": 4, "errors": 0}}))
    v = host_verdict(done, results=2, errors=1, judged=1)  # one result line never stored
    assert v.status == "failed" and "4 results on the host, 3 stored" in (v.error or "")
