"""SpoolLines and the host verdict (pure): a started case with no result or error before ``done``, a line of a type
the agent never writes, and a second ``hello`` are each one error row, and the host is never ``completed``
(issue 10: "``completed`` means every line the agent wrote is stored"). The agent's own line types all pass."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.ingest import UNFINISHED_KEY, HostVerdict, SpoolLines, done_record, host_verdict, unfinished_error
from orchestrator.protocol import EVENT_TYPES, Event
from orchestrator.transport.lines import Line

RUN = "01a2aaaa-0000-7000-8000-000000000010"
TS0 = 1_790_000_000.0
PROTOCOL = "its content is not trusted"
AGENT = Path(__file__).resolve().parents[2] / "agents" / "orch_agent"


def _doc(seq: int, type_: str, **fields: Any) -> bytes:
    return json.dumps({"v": 1, "seq": seq, "type": type_, "ts": TS0 + seq, **fields}).encode()


def _hello(seq: int = 0, run_id: str = RUN, host: str = "node-1") -> bytes:
    return _doc(seq, "hello", agent_version="a" * 64, run_id=run_id, host=host, suite="noop", facts={},
                cases_total=3)  # fmt: skip


def _start(seq: int, ci: int) -> bytes:
    return _doc(seq, "case_start", case_index=ci, case={"n": ci + 1})


def _result(seq: int, ci: int, type_: str = "result") -> bytes:
    return _doc(seq, type_, case_index=ci, case={"n": ci + 1}, metrics={"t": {"value": 1.0 + ci, "unit": "ms"}})


def _done(seq: int, results: int, errors: int = 0, **fields: Any) -> bytes:
    counts = {"lines": seq, "results": results, "errors": errors}
    return _doc(seq, "done", **{"status": "completed", "counts": counts, **fields})


def _events(lines: list[Line]) -> list[Event]:
    sp = SpoolLines(0)
    return [sp.event(line) for line in lines]


def _errors(events: list[Event]) -> list[tuple[int, str]]:
    return [(e.seq, str(e.data["message"])) for e in events if e.type == "error"]


def _verdict(events: list[Event]) -> HostVerdict:
    """The host's verdict as the store would give it: its rows counted from the events (an unfinished case's row
    included, as ``Store._apply`` adds it)."""
    done = events[-1]
    assert done.type == "done"
    results = sum(e.type == "result" for e in events)
    errors = sum(e.type == "error" for e in events) + (unfinished_error(done) is not None)
    return host_verdict(done_record(done), results=results, errors=errors)


def good_spool() -> list[Line]:
    """hello, (case_start, result) x 3, done: 8 lines."""
    lines: list[Line] = [_hello()]
    for ci in range(3):
        lines += [_start(len(lines), ci), _result(len(lines) + 1, ci)]
    return [*lines, _done(7, 3)]


def test_the_good_spool_is_completed_and_its_done_names_no_case() -> None:
    events = _events(good_spool())
    assert _errors(events) == []
    assert UNFINISHED_KEY not in events[-1].data and unfinished_error(events[-1]) is None
    assert "unfinished" not in done_record(events[-1])
    assert _verdict(events) == HostVerdict("completed")


def test_a_started_case_whose_result_line_was_deleted_is_an_error_row_and_a_failed_host() -> None:
    # the tester's F6: case 0's result deleted, seqs renumbered, done counts set to 6 lines and 2 results
    lines: list[Line] = [_hello(), _start(1, 0), _start(2, 1), _result(3, 1), _start(4, 2), _result(5, 2), _done(6, 2)]
    events = _events(lines)
    assert _errors(events) == []  # every line is the agent's as written
    done = events[-1]
    assert done.data[UNFINISHED_KEY] == [{"case_index": 0, "line": 1, "case": {"n": 1}}]
    assert done_record(done)["unfinished"] == [{"case_index": 0, "line": 1}]
    row = unfinished_error(done)
    want = ("case 0 (started at line 1) has no result or error before the done line (line 6); the agent writes one "
            "per case it starts, so the spool lacks its line")  # fmt: skip
    assert row == Event(seq=6, type="error", data={"message": want, "kind": "protocol", "line_type": "done",
                                                   "case_index": 0, "case": {"n": 1}})  # fmt: skip
    assert _verdict(events) == HostVerdict("failed", want)


def test_the_last_started_case_without_its_result_before_done_is_named() -> None:
    lines = good_spool()
    del lines[6]  # case 2's result
    lines = [*lines[:6], _done(6, 2)]
    events = _events(lines)
    assert [u["case_index"] for u in events[-1].data[UNFINISHED_KEY]] == [2]
    verdict = _verdict(events)
    assert verdict.status == "failed" and (verdict.error or "").startswith("case 2 (started at line 5) has no")


def test_two_started_cases_without_a_row_are_named_in_one_row_at_the_done_line() -> None:
    lines: list[Line] = [_hello(), _start(1, 0), _start(2, 1), _start(3, 2), _result(4, 2), _done(5, 1)]
    done = _events(lines)[-1]
    row = unfinished_error(done)
    assert row is not None and (row.seq, row.case_index) == (5, 0)
    assert str(row.data["message"]).startswith(
        "case 0 (started at line 1), case 1 (started at line 2) have no result or error before the done line "
        "(line 5); the agent writes one per case it starts, so the spool lacks their lines"
    )


@pytest.mark.parametrize(
    ("done", "status"),
    [
        (_done(2, 0, status="cancelled"), "cancelled"),  # a cancel stops mid-case by design
        (_done(2, 0, status="failed", reason="the agent worker stopped: cannot write x: (ENOSPC)"), "failed"),
    ],
)
def test_a_done_that_stopped_mid_case_names_no_unfinished_case(done: bytes, status: str) -> None:
    events = _events([_hello(), _start(1, 0), done])
    assert UNFINISHED_KEY not in events[-1].data
    assert _verdict(events).status == status


def test_a_refused_result_line_naming_its_case_is_its_row() -> None:
    # a result line with the wrong seq is an error row for case 0: the case has its row, no second one at done
    lines: list[Line] = [_hello(), _start(1, 0), _result(9, 0), _done(3, 1)]
    events = _events(lines)
    assert [seq for seq, _ in _errors(events)] == [2]
    assert UNFINISHED_KEY not in events[-1].data


def test_a_done_line_that_writes_the_orch_key_itself_is_not_believed() -> None:
    forged = [{"case_index": 7, "line": 1, "case": {}}]
    events = _events([*good_spool()[:-1], _done(7, 3, **{UNFINISHED_KEY: forged})])
    assert UNFINISHED_KEY not in events[-1].data and _verdict(events) == HostVerdict("completed")
    events = _events([_hello(), _start(1, 0), _done(2, 0, **{UNFINISHED_KEY: forged})])
    assert [u["case_index"] for u in events[-1].data[UNFINISHED_KEY]] == [0]


@pytest.mark.parametrize("type_", ["Result", "zzz", "RESULT", "heartbeat"])
def test_a_line_of_a_type_the_agent_never_writes_is_one_error_row_at_its_position(type_: str) -> None:
    lines = good_spool()
    lines[2] = _result(2, 0, type_=type_)  # case 0's result, its type changed
    events = _events(lines)
    want = (f"agent line 2 ({type_}): unknown event type {type_!r}; the agent writes only case_start, done, error, "
            "hello, log, result, and orch deployed this agent itself (content-addressed), so no newer agent writes "
            f"other types here; {PROTOCOL}")  # fmt: skip
    assert _errors(events) == [(2, want)]
    assert events[2].data["case_index"] == 0 and events[2].data["line_type"] == type_  # the row names its case
    assert UNFINISHED_KEY not in events[-1].data  # the case has that row
    verdict = _verdict(events)
    assert verdict.status == "failed"
    assert verdict.error == ("3 results on the host, 2 stored; 0 errors on the host, 1 stored (the store does not "
                             "hold what the agent wrote)")  # fmt: skip


def test_an_unknown_type_in_a_spool_whose_counts_were_edited_to_match_still_fails_the_host() -> None:
    lines = good_spool()
    lines = [*lines[:7], _doc(7, "zzz", note="x"), _done(8, 3)]
    events = _events(lines)
    assert [seq for seq, _ in _errors(events)] == [7]
    assert _verdict(events) == HostVerdict(
        "failed", "0 errors on the host, 1 stored (a line counted as neither result nor error on the host could "
        "not be taken as written (past the line cap, not valid, or not the agent's) and is stored as an error row)"
    )


def test_a_very_long_unknown_type_is_cut_in_its_row() -> None:
    ev = _events([_hello(), _doc(1, "x" * 5000)])[1]
    assert ev.type == "error" and len(str(ev.data["message"])) < 500 and ev.data["line_type"] == "x" * 60


def test_a_second_hello_mid_spool_is_one_error_row_naming_its_run_and_host() -> None:
    other = "01a2aaaa-0000-7000-8000-0000000000ff"
    lines = good_spool()
    lines = [*lines[:3], _hello(3, run_id=other, host="intruder"), *(_shift(x) for x in lines[3:])]
    events = _events(lines)
    assert _errors(events) == [(3, (
        f"agent line 3 (hello): a second hello (run {other!r}, host 'intruder'); the agent writes one hello, as "
        f"line 0 of its spool: this line is not this run's agent's; {PROTOCOL}"
    ))]  # fmt: skip
    assert _verdict(events).status == "failed"
    # the same hello again (same run and host) is refused alike, and a hello of the wrong shape names no value
    assert _errors(_events([_hello(), _hello(1)]))[0][1].startswith("agent line 1 (hello): a second hello (run "
                                                                    f"{RUN!r}, host 'node-1')")  # fmt: skip
    odd = _doc(1, "hello", run_id=5, host=None)
    assert "a second hello (run a int, host none)" in _errors(_events([_hello(), odd]))[0][1]


def _shift(line: Line) -> bytes:
    assert isinstance(line, bytes)
    doc = json.loads(line)
    doc["seq"] += 1
    if doc["type"] == "done":
        doc["counts"]["lines"] += 1
    return json.dumps(doc).encode()


def test_a_hello_at_line_0_of_a_follow_from_the_start_passes() -> None:
    assert _events([_hello()])[0].type == "hello"


def test_an_error_after_a_result_for_the_same_case_says_so() -> None:
    # LOW: it said "a second error for case 2"; it was the first error, after the case's result
    lines = good_spool()
    err = _doc(7, "error", case_index=2, case={"n": 3}, message="late")
    events = _events([*lines[:7], err, _done(8, 3, errors=1)])
    assert _errors(events) == [(7, (
        "agent line 7 (error): an error for case 2, which line 6 already ended with its result (the agent writes "
        f"one result or error per case); {PROTOCOL}"
    ))]  # fmt: skip
    two = _events([_hello(), _start(1, 0), _doc(2, "error", case_index=0, message="a"),
                   _doc(3, "error", case_index=0, message="b")])  # fmt: skip
    assert _errors(two)[1][1].startswith("agent line 3 (error): a second error for case 0, which line 2 already "
                                         "ended with its error")  # fmt: skip


def _agent_types() -> set[str]:
    """The types the agent writes: the first argument of every ``spool.append(...)`` in its source."""
    found: set[str] = set()
    for path in AGENT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "spool"):  # fmt: skip
                assert node.args and isinstance(node.args[0], ast.Constant), f"{path}:{node.lineno}: a computed type"
                found.add(node.args[0].value)
    return found


def test_every_type_the_agent_writes_is_one_orch_accepts() -> None:
    types = _agent_types()
    assert types == EVENT_TYPES, f"agent writes {sorted(types)}; orch accepts {sorted(EVENT_TYPES)}"


def test_a_command_suites_unfinished_case_is_stored_by_its_parameters_without_its_env() -> None:
    from orchestrator.suites.command import CommandSuite, command_result

    suite = CommandSuite(source="t.yaml", argv=("/bin/echo", "t={t}"), env={"HF_TOKEN": "hunter2-secret"},
                         timeout_s=600.0, grid=None, parser="regex", pattern="t=(?P<t>[0-9]+)", metrics=())  # fmt: skip
    case = {"t": 1, "argv": ["/bin/echo", "t=1"], "env": {"HF_TOKEN": "hunter2-secret"}, "timeout_s": 600}
    lines: list[Line] = [_hello(), _doc(1, "case_start", case_index=0, case=case), _done(2, 0)]
    done = command_result(suite, _events(lines)[-1], "g")
    assert done.data[UNFINISHED_KEY] == [{"case_index": 0, "line": 1, "case": {"t": 1}}]
    row = unfinished_error(done)
    assert row is not None and row.data["case"] == {"t": 1} and "hunter2" not in json.dumps(row.data)


@pytest.mark.parametrize("kind", ["result", "error"])
def test_a_line_whose_case_parameters_are_not_its_case_start_s_is_its_case_s_error_row(kind: str) -> None:
    """A tester's: case_start of case 0 with {"n": 1}, then case 0's result with {"n": 2}, then case 1 as written:
    two rows under n=2, none under n=1, completed. The agent writes one case object in both lines."""
    lines = good_spool()
    body = {"metrics": {"t": {"value": 1.0, "unit": "ms"}}} if kind == "result" else {"message": "boom"}
    lines[2] = _doc(2, kind, case_index=0, case={"n": 2}, **body)
    events = _events(lines)
    assert _errors(events) == [(2, f'agent line 2 ({kind}): its case parameters {{"n": 2}} are not those of case 0\'s '
                                   'case_start on line 1, {"n": 1}; its content is not trusted')]  # fmt: skip
    assert events[2].case_index == 0 and UNFINISHED_KEY not in events[-1].data
    assert _verdict(events).status in ("failed", "partial")
    assert _errors(_events(good_spool())) == []  # the same object in both lines is fine


@pytest.mark.parametrize("written", [1.0, True, "1"])
def test_case_parameters_are_compared_as_json_not_as_python_values(written: object) -> None:
    """A variant tester's: case_start {"n": 1}, result {"n": 1.0} (or true) was taken (1 == 1.0 == True in
    Python) and stored {"n": 1.0}, completed."""
    lines = good_spool()
    lines[2] = _doc(2, "result", case_index=0, case={"n": written}, metrics={"t": {"value": 1.0, "unit": "ms"}})
    assert [seq for seq, _ in _errors(_events(lines))] == [2]
    lines[2] = _doc(2, "result", case_index=0, case={"n": 1}, metrics={"t": {"value": 1.0, "unit": "ms"}})
    assert _errors(_events(lines)) == []


def _listed(lines: list[Line], cases: list[dict[str, Any]] | None) -> list[Event]:
    from orchestrator.ingest import CaseList

    sp = SpoolLines(0, cases=CaseList.from_info({"spec": {"cases": cases}}) if cases is not None else None)
    return [sp.event(line) for line in lines]


def test_case_lines_are_checked_against_the_run_case_list_redacted_env_matching_any_value() -> None:
    """The case list as the store keeps it (secret env values redacted) matches the agent's lines, which carry
    the secret; a parameter written 1.0 where the list has 1 is another parameter; an index the list lacks is
    refused too; without a list nothing is checked."""
    case = {"n": 1, "env": {"HF_TOKEN": "s3cr3t-value", "PUBLIC": "0"}}
    listed = {"n": 1, "env": {"HF_TOKEN": "***", "PUBLIC": "0"}}
    lines = [_hello(), _doc(1, "case_start", case_index=0, case=case),
             _doc(2, "result", case_index=0, case=case, metrics={"t": {"value": 1.0, "unit": "ms"}})]  # fmt: skip
    assert _errors(_listed(lines, [listed])) == []
    wrong = [_hello(), _doc(1, "case_start", case_index=0, case={"n": 1.0}),
             _doc(2, "result", case_index=0, case={"n": 1.0}, metrics={"t": {"value": 1.0, "unit": "ms"}}),
             _doc(3, "case_start", case_index=1, case={"n": 2})]  # fmt: skip
    events = _listed(wrong, [{"n": 1}])
    said = 'its case parameters {"n": 1.0} are not those of case 0 in the case list the run sent to the agent, {"n": 1}'
    assert _errors(events) == [
        (1, f"agent line 1 (case_start): {said}; {PROTOCOL}"),
        (2, f"agent line 2 (result): {said}; {PROTOCOL}"),
        (3, "agent line 3 (case_start): case 1 is not in the case list the run sent to the agent (1 case); "
            f"{PROTOCOL}"),
    ]  # fmt: skip
    assert [e.case for e in events[1:]] == [{"n": 1}, {"n": 1}, {"n": 2}]  # the list's entry where it has one
    assert _errors(_listed(wrong, None)) == []
