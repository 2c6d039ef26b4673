"""Field types and case order of spool lines (pure): a line orch would have to change to store is one error event
at its position — never stored with a field dropped, coerced or moved to another case."""

from __future__ import annotations

import json
from typing import Any

import pytest

from orchestrator.ingest import SpoolLines
from orchestrator.linecheck import field_problem
from orchestrator.protocol import Event

RUN = "01a2aaaa-0000-7000-8000-000000000001"


def _line(seq: int, type_: str, **fields: Any) -> bytes:
    return json.dumps({"v": 1, "seq": seq, "type": type_, "ts": 1_790_000_000.0 + seq, **fields}).encode()


def _result(seq: int, ci: int, **over: Any) -> bytes:
    fields: dict[str, Any] = {
        "case_index": ci,
        "case": {"t": ci + 1},
        "metrics": {"wall_ms": {"value": 1.0, "unit": "ms", "median": 1.0, "n": 1, "samples": [1.0]}},
        "info": {},
    }
    fields.update(over)
    return _line(seq, "result", **fields)


def echo_spool() -> list[bytes]:
    """The 8 lines of a 3-case run as the agent writes them: hello, (case_start, result) x 3, done."""
    lines = [_line(0, "hello", agent_version="a" * 64, run_id=RUN, suite="echo-t", facts={}, cases_total=3)]
    for ci in range(3):
        lines += [_line(len(lines), "case_start", case_index=ci, case={"t": ci + 1}), _result(len(lines) + 1, ci)]
    lines.append(_line(7, "done", status="completed", counts={"lines": 7, "results": 3, "errors": 0}))
    return lines


def _events(lines: list[bytes], start: int = 0) -> list[Event]:
    sp = SpoolLines(start)
    return [sp.event(line) for line in lines]


def _errors(events: list[Event]) -> list[tuple[int, str]]:
    return [(e.seq, str(e.data["message"])) for e in events if e.type == "error"]


def test_the_real_spool_passes_unchanged() -> None:
    events = _events(echo_spool())
    assert [e.type for e in events] == ["hello"] + ["case_start", "result"] * 3 + ["done"]
    assert [e.seq for e in events] == list(range(8))
    assert events[2].data["metrics"]["wall_ms"]["median"] == 1.0


def test_a_metric_statistic_that_is_a_string_is_one_error_row() -> None:
    lines = echo_spool()
    lines[2] = _result(2, 0, metrics={"wall_ms": {"value": 1.0, "unit": "ms", "median": "fast"}})
    events = _events(lines)
    assert _errors(events) == [
        (
            2,
            "agent line 2 (result): metrics: metric 'wall_ms': median must be a finite number, got 'fast'; "
            "its content is not trusted",
        )  # fmt: skip
    ]
    assert events[2].data["case_index"] == 0 and events[2].data["line_type"] == "result"
    assert [e.type for e in events[3:]] == ["case_start", "result", "case_start", "result", "done"]


def test_a_refused_result_line_is_counted_as_the_agents_result_and_no_other_refused_line_is() -> None:
    """protocol.JUDGED_KEY on the error of a result line refused for a field (the agent counted it as a result:
    the reconciliation must too); not on a refused case_start, nor on a result refused for the case order (a line
    the agent would not have written)."""
    lines = echo_spool()
    lines[2] = _result(2, 0, metrics={"wall_ms": {"value": 2**53 + 1, "unit": "ms"}})
    lines[3] = _line(3, "case_start", case_index="1", case={"t": 2})
    lines[6] = _result(6, 0)  # case 0 again: a second result for it
    events = _events(lines)
    assert [(e.seq, e.type) for e in events if e.type == "error"] == [(2, "error"), (3, "error"), (6, "error")]
    assert events[2].data["info"] == {"agent_result": True, "error_kind": "invalid"}
    assert "metric 'wall_ms': value 9007199254740993 is an integer past 2**53" in events[2].data["message"]
    assert "info" not in events[3].data and "info" not in events[6].data


@pytest.mark.parametrize(
    ("metrics", "says"),
    [
        ([1, 2], "metrics must be an object of name -> {value, unit, ...}, got [1, 2]"),
        ("fast", "metrics must be an object of name -> {value, unit, ...}, got 'fast'"),
        ({"wall_ms": [1]}, "metric 'wall_ms' needs a finite number 'value' and a string 'unit'"),
        ({"wall_ms": {"value": "1", "unit": "ms"}}, "metric 'wall_ms' needs a finite number 'value'"),
        ({"wall_ms": {"value": 1, "unit": "ms", "n": 2.5}}, "metric 'wall_ms': n must be a non-negative integer"),
        ({"wall_ms": {"value": 1, "unit": "ms", "samples": [1, "2"]}}, "samples must be a list of finite numbers"),
    ],
)
def test_metrics_of_the_wrong_shape_are_named(metrics: Any, says: str) -> None:
    lines = echo_spool()
    lines[4] = _result(4, 1, metrics=metrics)
    [(seq, message)] = _errors(_events(lines))
    assert seq == 4 and says in message


@pytest.mark.parametrize(
    ("pos", "line", "says"),
    [
        (2, _result(2, 0, case=[1, 2]), "case must be an object of parameters, got [1, 2]"),
        (2, _result(2, 0, case_index="0"), "case_index must be a non-negative integer, got '0'"),
        (2, _result(2, 0, case_index=True), "case_index must be a non-negative integer, got True"),
        (2, _result(2, 0, case_index=-1), "case_index must be a non-negative integer, got -1"),
        (2, _result(2, 0, info="note"), "info must be an object, got 'note'"),
        (1, _line(1, "case_start", case_index=0, case="t=1"), "case must be an object of parameters, got 't=1'"),
        (
            0,
            _line(0, "hello", run_id=RUN, suite="echo-t", facts={}, cases_total="3"),
            "cases_total must be a non-negative integer, got '3'",
        ),  # fmt: skip
        (0, _line(0, "hello", run_id=RUN, suite=["echo-t"], facts={}), "suite must be a string, got ['echo-t']"),
        (0, _line(0, "hello", run_id=RUN, suite="echo-t", facts=[]), "facts must be an object, got []"),
        (
            7,
            _line(7, "done", status="completed", counts={"lines": 7, "results": "3", "errors": 0}),
            "counts.results must be a non-negative integer, got '3'",
        ),  # fmt: skip
        (7, _line(7, "done", status="completed", counts=[7, 3, 0]), "counts must be an object"),
        (7, _line(7, "done", status="great", counts={}), "status must be one of cancelled, completed, failed"),
        (2, _line(2, "log", level="info", message={"m": 1}), "message must be a string, got {'m': 1}"),
        (2, _line(2, "error", case_index="0", message="boom"), "case_index must be a non-negative integer"),
        (2, _line(2, "error", case_index=0, message=None), "message must be a string, got None"),
    ],
)
def test_each_field_of_the_wrong_type_is_named(pos: int, line: bytes, says: str) -> None:
    lines = echo_spool()
    lines[pos] = line
    events = _events(lines)
    [(seq, message)] = _errors(events)
    assert seq == pos and says in message, message
    bad = events[pos]
    # a wrong-typed case or case_index is never carried onto the error row
    assert not isinstance(bad.data.get("case_index"), (str, bool)) and bad.data.get("case", {}) != [1, 2]


@pytest.mark.parametrize("ts", ["now", True, [1]])
def test_a_ts_that_is_not_a_number_is_an_error_not_a_missing_time(ts: Any) -> None:
    lines = echo_spool()
    doc = json.loads(lines[2])
    doc["ts"] = ts
    lines[2] = json.dumps(doc).encode()
    [(seq, message)] = _errors(_events(lines))
    assert seq == 2 and "agent line 2 (result): ts must be unix seconds" in message


def test_a_result_for_another_case_than_the_one_started_is_an_error() -> None:
    lines = echo_spool()
    lines[2] = _result(2, 1)  # right after the case_start of case 0
    events = _events(lines)
    assert _errors(events) == [
        (2, "agent line 2 (result): it is for case 1, but the case started last is case 0; its content is not trusted")
    ]
    assert events[2].data["case_index"] == 1  # the row names the case the line claimed
    assert [e.type for e in events[3:7]] == ["case_start", "result", "case_start", "result"]


def test_a_second_result_for_a_case_is_an_error_and_results_without_case_start_are_checked_for_that() -> None:
    lines = echo_spool()
    lines[3] = _result(3, 0)  # instead of case_start 1: a second result for case 0
    msgs = _errors(_events(lines))
    assert [seq for seq, _ in msgs] == [3]
    assert "a second result for case 0, which line 2 already ended with its result (the agent writes one result " \
        "or error per case)" in msgs[0][1]
    bare = [echo_spool()[0], _result(1, 0), _result(2, 1), _result(3, 1), _result(4, 2)]  # no case_start lines
    assert [(seq, "a second result for case 1" in m) for seq, m in _errors(_events(bare))] == [(3, True)]


def test_a_reattached_follow_does_not_judge_the_case_it_did_not_see_start() -> None:
    events = _events(echo_spool()[2:], start=2)
    assert [e.type for e in events] == ["result", "case_start", "result", "case_start", "result", "done"]


def test_bytes_that_are_not_utf8_are_an_error_not_replacement_characters() -> None:
    lines = echo_spool()
    lines[2] = lines[2].replace(b'"case": {"t": 1}', b'"case": {"t": 1, "tag": "\xff\xfe"}')
    events = _events(lines)
    at = lines[2].index(b"\xff")
    assert _errors(events) == [(2, f"agent line 2 is not UTF-8 (byte 0xff at byte {at}); its content is not trusted")]
    assert "\ufffd" not in json.dumps(events[2].data)


def test_one_blank_line_is_one_error_row_and_the_lines_after_it_stay_the_agents() -> None:
    lines = echo_spool()
    lines.insert(3, b"")
    events = _events(lines)
    assert _errors(events) == [(3, "agent line 3 is blank; the agent writes one JSON event per line")]
    assert [e.seq for e in events] == list(range(9))
    assert [e.type for e in events[4:]] == ["case_start", "result", "case_start", "result", "done"]
    assert events[8].data["counts"]["lines"] == 7  # the agent's count: reconciliation sees 8 lines stored


def test_after_a_blank_line_a_line_claiming_its_position_is_a_mismatch() -> None:
    lines = echo_spool()
    lines.insert(3, b"   ")
    lines[4] = _line(4, "case_start", case_index=1, case={"t": 2})  # claims its position, not the agent's seq 3
    msgs = _errors(_events(lines))
    assert msgs[0] == (3, "agent line 3 is blank; the agent writes one JSON event per line")
    assert msgs[1][0] == 4 and "claims seq 4 (seq 3 expected after 1 blank line(s))" in msgs[1][1]


def test_field_problem_accepts_what_the_agent_writes() -> None:
    assert field_problem("error", {"message": "boom", "case_index": 0, "case": {"t": 1}, "telemetry": None}) is None
    assert field_problem("error", {"message": "bad spec"}) is None
    assert field_problem("hello", {"run_id": RUN, "suite": None, "facts": {}, "cases_total": 0}) is None
    assert field_problem("done", {"status": "failed", "counts": {"lines": 2, "results": 0, "errors": 1},
                                  "reason": "the agent worker stopped: disk full"}) is None  # fmt: skip
    assert field_problem("result", {"case_index": 0, "case": {"argv": ["echo"]}, "metrics": {}}) is None
