"""A case whose output orch's parser judged an error (nccl-tests wrong elements, a malformed -J file, failed: -3)
leaves its host ``partial``, not ``failed``: the agent counted a result, the store holds an error row that says
so (``info.agent_result``), and the reconciliation counts it on the agent's side — on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.ingest import SpoolLines, done_record, host_verdict
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


def _agent_line(seq: int, type_: str, **fields: Any) -> bytes:
    return json.dumps({"v": 1, "seq": seq, "type": type_, "ts": 1_790_000_000.0, **fields}).encode() + b"\n"


PAST = 2**53 + 1  # the first integer a double cannot hold: stored as 9007199254740992 before


@pytest.mark.parametrize(
    ("metric", "said"),
    [
        ({"value": PAST, "unit": "B"}, f"value {PAST} is an integer past 2**53"),
        ({"value": 2**63 - 1, "unit": "B"}, "value 9223372036854775807 is an integer past 2**53"),
        ({"value": 12345678901234567890, "unit": "B"}, "value 12345678901234567890 is an integer past 2**53"),
        ({"value": 10**20, "unit": "B"}, f"value {10**20} is an integer past 2**53"),  # past orjson's 64 bits
        ({"value": 1.0, "unit": "B", "max": -PAST}, f"max -{PAST} is an integer past 2**53"),
        ({"value": 1.0, "unit": "B", "samples": [1, 2, PAST]}, f"samples[] {PAST} is an integer past 2**53"),
    ],
)
def test_an_agent_result_with_an_integer_a_double_cannot_hold_is_that_cases_error(
    store: Store, metric: dict[str, Any], said: str
) -> None:
    """A tester's agent line with ``"value": 12345678901234567890`` was stored rounded (…567168), and one with 21
    digits made the host ``failed`` with "2 results on the host, 1 stored" (the store held its line as an error
    row). One rule now (protocol.EXACT_INT_MAX, as for the parsers of tools' output): the case is an error row
    naming the metric and the number, counted as the agent's result, and the host is ``partial``."""
    case = {"M": 1}
    raw = [
        _agent_line(0, "case_start", case_index=0, case=case),
        _agent_line(1, "result", case_index=0, case=case, metrics={"bytes": metric}),
        _agent_line(2, "case_start", case_index=1, case={"M": 2}),
        _agent_line(3, "result", case_index=1, case={"M": 2}, metrics={"bytes": {"value": 2**53, "unit": "B"}}),
        _agent_line(4, "done", status="completed", counts={"lines": 4, "results": 2, "errors": 0}),
    ]
    lines = SpoolLines()
    events = [lines.event(r) for r in raw]
    rid = store.create_run(suite="s", params={}, preset=None, label=None, hosts=["h1"], started_by="t@box",
                           started_on="box")  # fmt: skip
    store.start_host_run(rid, "h1", facts={}, agent_version="v", build_sha=None)
    store.ingest(rid, "h1", events)
    rec = store.get_host_run(rid, "h1")
    assert rec is not None and (rec.results, rec.errors) == (1, 1)
    assert store.judged_errors(rid, "h1") == 1
    ok, bad = sorted(store.results(rid, limit=10).items, key=lambda r: r.status == "error")
    assert ok.metrics["bytes"]["value"] == 2**53  # the edge is a metric, stored exactly
    assert bad.seq == 1 and bad.case == case and bad.info is not None and bad.info["error_kind"] == "invalid"
    assert bad.error is not None and bad.error.startswith(f"agent line 1 (result): metrics: metric 'bytes': {said}")
    assert "cannot hold exactly; write it as a float (1.2e19) or in a larger unit" in bad.error
    v = host_verdict(rec.done_counts, results=rec.results, errors=rec.errors,
                     judged=store.judged_errors(rid, "h1"), first_error=bad.error)  # fmt: skip
    assert v.status == "partial" and (v.error or "").startswith("1 case failed: agent line 1 (result)"), v


def test_a_malformed_result_the_store_refuses_is_counted_as_the_agents_result(store: Store) -> None:
    """The store's own check (an event that reached it without ingest's: ``Store._apply``) marks its error row as
    the agent's result too."""
    rid = store.create_run(suite="s", params={}, preset=None, label=None, hosts=["h1"], started_by="t@box",
                           started_on="box")  # fmt: skip
    store.start_host_run(rid, "h1", facts={}, agent_version="v", build_sha=None)
    data = {"case_index": 0, "case": {"M": 1}, "metrics": {"b": {"value": PAST, "unit": "B"}}}
    store.ingest(rid, "h1", [Event(seq=0, type="result", data=data)])
    (row,) = store.results(rid, limit=10).items
    assert row.status == "error" and row.error == (
        f"malformed result: metric 'b': value {PAST} is an integer past 2**53, which the store's numbers (IEEE 754 "
        "doubles) cannot hold exactly; write it as a float (1.2e19) or in a larger unit"
    )
    assert store.judged_errors(rid, "h1") == 1
