"""SpoolLines at its edges (pure): what each event carries on, the error rows' exact data, the blank-line shift
over several blank lines, the cap an oversize line is judged by, and which lines open, end or leave a case.

Each test here fails against a mutant of ``orchestrator/ingest.py`` that the other ingest tests let through
(issue 19; docs/testing.md, "orchestrator/ingest.py (session 5)")."""

from __future__ import annotations

import json
from typing import Any

from orchestrator.ingest import SpoolLines
from orchestrator.protocol import Event
from orchestrator.transport.lines import Line, OversizeLine

RUN = "01a2aaaa-0000-7000-8000-000000000001"
TS0 = 1_790_000_000.0
PROTOCOL = "its content is not trusted"


def _doc(seq: int, type_: str, **fields: Any) -> bytes:
    return json.dumps({"v": 1, "seq": seq, "type": type_, "ts": TS0 + seq, **fields}).encode()


def _hello(seq: int = 0) -> bytes:
    return _doc(seq, "hello", agent_version="a" * 64, run_id=RUN, suite="echo-t", facts={}, cases_total=2)


def _start(seq: int, ci: int, **over: Any) -> bytes:
    return _doc(seq, "case_start", **{"case_index": ci, "case": {"t": ci + 1}, **over})


def _result(seq: int, ci: int) -> bytes:
    metrics = {"wall_ms": {"value": 1.0, "unit": "ms", "median": 1.0, "n": 1, "samples": [1.0]}}
    return _doc(seq, "result", case_index=ci, case={"t": ci + 1}, metrics=metrics, info={})


def _events(lines: list[Line], sp: SpoolLines | None = None) -> list[Event]:
    sp = SpoolLines(0) if sp is None else sp
    return [sp.event(line) for line in lines]


def _errors(events: list[Event]) -> list[tuple[int, str]]:
    return [(e.seq, str(e.data["message"])) for e in events if e.type == "error"]


BLANK3 = "agent line 3 is blank; the agent writes one JSON event per line"
BLANK4 = "agent line 4 is blank; the agent writes one JSON event per line"


def test_two_blank_lines_shift_the_agents_seq_by_two() -> None:
    # positions 3 and 4 blank: the agent's seq 3..6 are at positions 5..8 (shift 2, not 1)
    done = _doc(5, "done", status="completed", counts={"lines": 5, "results": 2, "errors": 0})
    lines: list[Line] = [_hello(), _start(1, 0), _result(2, 0), b"", b"", _start(3, 1), _result(4, 1), done]
    events = _events(lines)
    assert _errors(events) == [(3, BLANK3), (4, BLANK4)]
    assert [e.seq for e in events] == list(range(8))
    assert [e.type for e in events[5:]] == ["case_start", "result", "done"]
    # the blank line's row is a protocol error: its data exactly
    assert events[3].data == {"message": BLANK3, "kind": "protocol"}


def test_an_oversize_line_after_a_blank_line_is_at_its_position_judged_by_the_spools_cap() -> None:
    # position 2, after one blank line: the agent's seq 1 (shift 1); the error row is at position 1 + 1 = 2
    sp = SpoolLines(0, cap=300)
    events = _events([_hello(), b"", OversizeLine(1000, b'{"v":1,"seq":1,"type":"result","case":')], sp)
    big = events[2]
    assert (big.seq, big.type) == (2, "error")
    assert big.data == {
        "message": "agent line 2 (claiming seq 1) is 1,000 bytes, over orch's cap of 300 bytes per line; it was "
        "not ingested (a tool's large output belongs in the host's run directory, not in an event)",
        "kind": "protocol",
        "line_bytes": 1000,
    }
    assert sp.position == 3 and sp.shift == 1


def test_the_default_start_is_the_first_line_of_the_spool() -> None:
    sp = SpoolLines()
    ev = sp.event(_hello())
    assert (ev.seq, ev.type) == (0, "hello")
    assert sp.position == 1


def test_a_result_event_carries_its_time_version_plainness_and_checked_metrics() -> None:
    ev = _events([_hello(), _start(1, 0), _result(2, 0)])[2]
    assert (ev.seq, ev.type, ev.ts, ev.v) == (2, "result", TS0 + 2, 1)  # ts 1_790_000_002.0 as written
    assert ev.plain is True  # plain ASCII JSON, no backslash: nothing needs a stand-in
    # compute.clean_metrics by hand: value and the median as floats, n kept, the samples apart by metric name
    assert ev.clean_metrics == ({"wall_ms": {"value": 1.0, "unit": "ms", "median": 1.0, "n": 1}}, {"wall_ms": [1.0]})
    assert ev.data["case"] == {"t": 1} and ev.data["info"] == {}


def test_a_host_level_error_between_case_start_and_result_leaves_the_case_open() -> None:
    lines: list[Line] = [_hello(), _start(1, 0), _doc(2, "error", message="bad spec: no such key"), _result(3, 0)]
    events = _events(lines)
    assert events[2] == Event(seq=2, type="error", ts=TS0 + 2, data={"message": "bad spec: no such key"})
    assert [e.type for e in events] == ["hello", "case_start", "error", "result"]
    assert events[3].data["case_index"] == 0


def test_a_case_error_ends_its_case_and_one_for_another_case_is_refused() -> None:
    err0 = _doc(2, "error", case_index=0, case={"t": 1}, message="boom", exception="RuntimeError")
    events = _events([_hello(), _start(1, 0), err0, _result(3, 0)])
    assert events[2].type == "error" and events[2].data["exception"] == "RuntimeError"
    assert _errors(events[3:]) == [
        (
            3,
            "agent line 3 (result): a result for case 0, which line 2 already ended with its error (the agent "
            f"writes one result or error per case); {PROTOCOL}",
        )
    ]
    err1 = _doc(2, "error", case_index=1, case={"t": 2}, message="boom")
    events = _events([_hello(), _start(1, 0), err1])
    assert _errors(events) == [
        (2, f"agent line 2 (error): it is for case 1, but the case started last is case 0; {PROTOCOL}")
    ]


def test_a_protocol_error_naming_a_case_neither_ends_nor_closes_it() -> None:
    # line 2 claims seq 9: one protocol error that keeps case_index 0; the result at line 3 is still case 0's one
    lines: list[Line] = [_hello(), _start(1, 0), _result(9, 0), _result(3, 0)]
    events = _events(lines)
    assert _errors(events) == [
        (
            2,
            "agent line 2 (result) claims seq 9: a line's seq must be its position in the spool (a gap, a duplicate "
            f"or a reordered line); {PROTOCOL}",
        )
    ]
    assert events[2].data["case_index"] == 0 and events[2].data["kind"] == "protocol"
    assert events[3].type == "result" and events[3].data["case_index"] == 0


def test_a_refused_case_start_forgets_which_case_is_open() -> None:
    # case 0 started, then a case_start of case 1 whose case is not an object: refused, so the open case is
    # unknown and the result of case 1 after it is stored (only the second-line rule applies)
    lines: list[Line] = [_hello(), _start(1, 0), _start(2, 1, case="t=2"), _result(3, 1)]
    events = _events(lines)
    assert events[2] == Event(seq=2, type="error", data={
        "message": f"agent line 2 (case_start): case must be an object of parameters, got 't=2'; {PROTOCOL}",
        "kind": "protocol",
        "line_type": "case_start",
        "case_index": 1,
    })  # fmt: skip
    assert [e.type for e in events] == ["hello", "case_start", "error", "result"]


def test_a_refused_line_of_another_type_keeps_the_open_case() -> None:
    # a log line with a numeric level is refused; case 0 is still the one started last
    lines: list[Line] = [_hello(), _start(1, 0), _doc(2, "log", level=5, message="hot"), _result(3, 1)]
    msgs = _errors(_events(lines))
    assert msgs == [
        (2, f"agent line 2 (log): level must be a string, got 5; {PROTOCOL}"),
        (3, f"agent line 3 (result): it is for case 1, but the case started last is case 0; {PROTOCOL}"),
    ]
