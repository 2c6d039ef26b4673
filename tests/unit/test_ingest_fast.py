"""The ingest hot paths against the general checks they stand in for (pure): every line, well-formed or not, gives
the same event, the same cleaned metrics and the same case state through the fast paths
(``protocol._parse_compact``, ``ingest._well_formed_result``, ``compute.clean_metrics`` returning a clean metric
object as it is) as through the general path alone (``protocol.parse_line``'s general reading,
``SpoolLines._checked``, ``linecheck.checked_fields``) — what keeps the fast paths honest (bench/ingest.py,
docs/testing.md "Ingest rate")."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest

from orchestrator import ingest, protocol
from orchestrator.ingest import CaseList, SpoolLines
from orchestrator.linecheck import checked_fields
from orchestrator.protocol import Event, parse_metric
from orchestrator.store.compute import clean_metrics
from orchestrator.transport.lines import Line

TS0 = 1_790_000_000.0
GOOD_METRICS = {"wall_ms": {"value": 1.0, "unit": "ms", "n": 1}}

# A result line's fields, each variant at its own case index (its own line): wrong types, missing fields, numbers a
# double cannot hold, extra and unknown fields, and the metric objects clean_metrics reads in every way.
RESULT_VARIANTS: list[dict[str, Any]] = [
    {},
    {"case_index": "1"},
    {"case_index": 1.5},
    {"case_index": True},
    {"case_index": -1},
    {"case_index": 2**31},
    {"case_index": None},
    {"case_index": 2**64},
    {"case": [1]},
    {"case": "c"},
    {"case": None},
    {"case": {"seed": 1, "m": 4096, "concurrency": 8, "size_bytes": 1.0}},
    {"case": {"env": {"K": "é"}, "M": "x\u0000y"}},
    {"metrics": []},
    {"metrics": None},
    {"metrics": {}},
    {"metrics": {"t": 1.0}},
    {"metrics": {"t": {"unit": "ms"}}},
    {"metrics": {"t": {"value": 1, "unit": "ms"}}},
    {"metrics": {"t": {"value": "1", "unit": "ms"}}},
    {"metrics": {"t": {"value": True, "unit": "ms"}}},
    {"metrics": {"t": {"value": 1.0, "unit": 5}}},
    {"metrics": {"t": {"value": 1.0}}},
    {"metrics": {"t": {"unit": "ms", "value": 1.0}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "n": 1, "median": 1.0}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "median": 1.0, "p10": 0.5, "p90": 2.0, "min": 0.1, "max": 3.0,
                       "n": 7}}},  # fmt: skip
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "median": None}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "median": 2}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "median": "2"}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "p90": False}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "n": None}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "n": 1.0}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "n": -1}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "n": True}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "samples": [1.0, 2]}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "samples": [1.0, "2"]}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "samples": 1.0}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "samples": None}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "samples": [1e308, 1e308]}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "samples": [2**60]}}},
    {"metrics": {"t": {"value": 2**60, "unit": "ms"}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "min": 2**60}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "extra": {"x": 1}}}},
    {"metrics": {"t": {"value": 1.0, "unit": "ms", "n": 1, "unknown": None}}},
    {"metrics": {"a": {"value": 1.0, "unit": "ms"}, "b": {"value": 2, "unit": "s"}}},
    {"metrics": {"a": {"value": 1.0, "unit": "ms"}, "b": {"value": 2.0, "unit": "s", "samples": [1.0]}}},
    {"metrics": {"t": {"value": 1e-7, "unit": "ms"}, "u": {"value": 0.0, "unit": "ms"}}},
    {"metrics": {"t": {"value": 1.5e19, "unit": "ms"}}},
    {"info": []},
    {"info": "x"},
    {"info": None},
    {"info": {"nested": {"a": [1, {"b": None}]}, "text": "ü\u0000"}},
    {"info": {"text": "a\u0000"}},
    {"extra_field": 1, "another": {"x": [1, 2]}},
]
PARSED_BY_JSON = [  # what orjson refuses or rounds: the general path reads these (json), the fast path never
    '"value":NaN', '"value":1e400', '"value":1e-400', '"value":18446744073709551616', '"value":1E5',
]  # fmt: skip


def _text(doc: dict[str, Any], compact: bool) -> bytes:
    return (json.dumps(doc, separators=(",", ":")) if compact else json.dumps(doc)).encode()


def _result(seq: int, ci: int, over: dict[str, Any], compact: bool = True) -> bytes:
    fields: dict[str, Any] = {"case_index": ci, "case": {"t": ci}, "metrics": GOOD_METRICS, "info": {}}
    fields.update(over)
    for key in [k for k, v in over.items() if v is _MISSING]:
        del fields[key]
    return _text({"v": 1, "seq": seq, "type": "result", "ts": TS0 + seq, **fields}, compact)


_MISSING = object()


def _spool() -> list[Line]:
    """A spool exercising each variant compact and spaced, then the lines that break the order of the cases."""
    lines: list[Line] = [_text({"v": 1, "seq": 0, "type": "hello", "agent_version": "a" * 64, "facts": {},
                                "cases_total": 500}, True)]  # fmt: skip
    variants = [*RESULT_VARIANTS, {"case_index": _MISSING}, {"case": _MISSING}, {"metrics": _MISSING},
                {"info": _MISSING}]  # fmt: skip
    ci = 10
    for compact in (True, False):
        for over in variants:
            lines.append(_result(len(lines), ci, over, compact))
            ci += 1
    for literal in PARSED_BY_JSON:
        seq = len(lines)
        lines.append(_result(seq, ci, {}).replace(b'"value":1.0', literal.encode()))
        ci += 1
    seq = len(lines)
    lines += [
        _result(seq, 10, {}),  # a second result for case 10
        _result(seq + 1, 0, {}, compact=True).replace(f'"seq":{seq + 1}'.encode(), b'"seq":3'),  # out of order
        _text({"v": 1, "seq": seq + 2, "type": "case_start", "ts": TS0, "case_index": 400, "case": {"t": 400}}, True),
        _result(seq + 3, 401, {}),  # not the case started last
        _text({"v": 1, "seq": seq + 4, "type": "case_start", "ts": TS0, "case_index": 402, "case": {"t": 402}}, True),
        _result(seq + 5, 402, {"case": {"t": 9}}),  # not the case_start's parameters
        _result(seq + 6, 403, {}).replace(b'"v":1', b'"v":2'),
        _result(seq + 7, 404, {"ts": 5.0}),
        _result(seq + 8, 405, {}) + b"  ",
        b"\t" + _result(seq + 9, 406, {}),
        b"",  # blank: the lines after it are shifted
        _result(seq + 10, 407, {}),
        _result(seq + 11, 408, {}).replace(b'"ms"', b'"\xff"'),  # not UTF-8
        _result(seq + 12, 409, {}).replace(b'"info":{}', b'"info":{},"info":{}'),  # a key twice
        _result(seq + 13, 410, {}).replace(b"result", b"Result"),
        _text({"v": 1, "seq": seq + 14, "type": "error", "ts": TS0, "message": "m", "case_index": 411,
               "case": {"t": 411}}, True),  # fmt: skip
        _result(seq + 15, 411, {}),  # a result after the case's error
        _text({"v": 1, "seq": seq + 16, "type": "done", "ts": TS0, "status": "completed",
               "counts": {"lines": seq + 16, "results": 1, "errors": 1}}, True),  # fmt: skip
    ]
    return lines


def _events(lines: list[Line], cases: CaseList | None) -> tuple[list[Event], SpoolLines]:
    sp = SpoolLines(0, cases=cases)
    return [sp.event(line) for line in lines], sp


def _state(sp: SpoolLines) -> dict[str, Any]:
    return {k: v for k, v in vars(sp).items() if k != "cases"} if hasattr(sp, "__dict__") else {}


@pytest.mark.parametrize("with_list", [False, True])
def test_fast_paths_give_the_general_paths_events(monkeypatch: pytest.MonkeyPatch, with_list: bool) -> None:
    lines = _spool()
    cases = CaseList([{"t": i} for i in range(300)] + [{"t": 9}] * 200) if with_list else None
    fast, fast_sp = _events(lines, cases)
    assert sum(e.type == "result" for e in fast) > 20  # the fast path took the well-formed ones
    monkeypatch.setattr(protocol, "_parse_compact", lambda *a: None)
    monkeypatch.setattr(ingest, "_well_formed_result", lambda data: None)
    slow, slow_sp = _events(lines, cases)
    assert [(e.seq, e.type, e.ts, e.v, e.data, e.plain) for e in fast] == \
        [(e.seq, e.type, e.ts, e.v, e.data, e.plain) for e in slow]  # fmt: skip
    assert [e.clean_metrics for e in fast] == [e.clean_metrics for e in slow]
    # the same JSON text of each cleaned metric set (key order too: it is what the store writes)
    assert [orjson.dumps(e.clean_metrics) for e in fast] == [orjson.dumps(e.clean_metrics) for e in slow]
    assert _state(fast_sp) == _state(slow_sp)


def test_fast_paths_are_taken_for_a_compact_result_line() -> None:
    line = _result(1, 0, {})
    assert protocol._parse_compact(line, 1, 1, 0) == protocol.parse_line(line, expected_seq=1)
    ev = protocol.parse_line(line, expected_seq=1)
    assert ingest._well_formed_result(ev.data) == checked_fields("result", ev.data)[1]
    assert protocol._parse_compact(_result(1, 0, {}, compact=False), 1, 1, 0) is None


@pytest.mark.parametrize("over", RESULT_VARIANTS)
def test_well_formed_result_is_checked_fields(over: dict[str, Any]) -> None:
    data: dict[str, Any] = {"case_index": 3, "case": {"t": 3}, "metrics": GOOD_METRICS, "info": {}, **over}
    problem, cleaned = checked_fields("result", data)
    assert ingest._well_formed_result(data) == (cleaned if problem is None else None)


def _reference(raw: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """clean_metrics by protocol.parse_metric, the slow validator, with the samples apart."""
    metrics, samples = {}, {}
    for name, m in raw.items():
        d = parse_metric(name, m).to_dict()
        if "samples" in d:
            samples[name] = m["samples"]
            del d["samples"]
        metrics[name] = d
    return metrics, samples or None


# parse_metric takes samples whose sum overflows a double; clean_metrics refuses them (tested in test_ingest_fast's
# spool test and tests/unit/test_store_compute.py)
@pytest.mark.parametrize("over", [v for v in RESULT_VARIANTS if isinstance(v.get("metrics"), dict)
                                  and "1e308" not in repr(v).replace("1e+308", "1e308")])  # fmt: skip
def test_clean_metrics_as_is_writes_what_it_would_build(over: dict[str, Any]) -> None:
    raw = over["metrics"]
    try:
        want = _reference(raw)
    except ValueError:
        with pytest.raises(ValueError):
            clean_metrics(raw)
        return
    got = clean_metrics(raw)
    assert got == want
    assert orjson.dumps(got) == orjson.dumps(want)  # the same keys in the same order
