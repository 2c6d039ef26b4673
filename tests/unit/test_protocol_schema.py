"""protocol: the agent's JSON lines parsed into events — version check, malformed lines, metric validation."""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.protocol import PROTOCOL_VERSION, Event, Metric, error_event, parse_line, parse_metric
from orchestrator.store.storable import storable


def line(**doc: Any) -> str:
    return json.dumps({"v": PROTOCOL_VERSION, **doc})


def test_a_result_line_becomes_an_event_with_every_other_field_in_data() -> None:
    raw = line(seq=3, type="result", ts=1_700_000_000.5, case_index=2, case={"M": 8},
               metrics={"time_ms": {"value": 0.3, "unit": "ms"}}, extra={"kept": True})  # fmt: skip
    ev = parse_line(raw, expected_seq=3)
    assert ev == Event(
        seq=3,
        type="result",
        ts=1_700_000_000.5,
        v=1,
        data={"case_index": 2, "case": {"M": 8}, "metrics": {"time_ms": {"value": 0.3, "unit": "ms"}},
              "extra": {"kept": True}},
    )  # fmt: skip
    assert (ev.case, ev.case_index) == ({"M": 8}, 2)
    assert parse_line(raw.encode(), expected_seq=3) == ev  # bytes as read from the stream
    assert parse_line("  " + raw + "\r\n", expected_seq=3) == ev


def test_integer_ts_is_a_float_and_a_non_number_ts_is_dropped() -> None:
    assert parse_line(line(seq=0, type="log", ts=1_790_000_005), expected_seq=0).ts == 1_790_000_005.0
    assert isinstance(parse_line(line(seq=0, type="log", ts=1_790_000_005), expected_seq=0).ts, float)
    assert parse_line(line(seq=0, type="log", ts="soon"), expected_seq=0).ts is None
    assert parse_line(line(seq=0, type="log", ts=True), expected_seq=0).ts is None


@pytest.mark.parametrize("v", [2, 0, None, "1", 1.5, True, 1.0])  # true == 1 and 1.0 == 1 in Python
def test_another_protocol_version_is_an_error_event(v: Any) -> None:
    """Issue 19: with the version check removed, any agent protocol version was accepted."""
    doc: dict[str, Any] = {"seq": 4, "type": "result", "case": {"M": 1}, "metrics": {}}
    if v is not None:
        doc["v"] = v
    ev = parse_line(json.dumps(doc), expected_seq=4)
    assert (ev.seq, ev.type, ev.data["kind"]) == (4, "error", "protocol")
    assert ev.data["message"] == f"agent line 4 speaks protocol v{v!r}, orch speaks v1"
    assert ev.case is None  # a protocol error never becomes a case's error row


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("not json at all", "malformed agent line 7 (not JSON): 'not json at all'"),
        ("[1, 2]", "malformed agent line 7 (not an object)"),
        ('"text"', "malformed agent line 7 (not an object)"),
        (json.dumps({"v": 1, "type": "log"}), "agent line 7 lacks integer 'seq' or 'type'"),
        (json.dumps({"v": 1, "seq": "7", "type": "log"}), "agent line 7 lacks integer 'seq' or 'type'"),
        (json.dumps({"v": 1, "seq": True, "type": "log"}), "agent line 7 lacks integer 'seq' or 'type'"),
        (json.dumps({"v": 1, "seq": 7}), "agent line 7 lacks integer 'seq' or 'type'"),
        (json.dumps({"v": 1, "seq": 7, "type": 3}), "agent line 7 lacks integer 'seq' or 'type'"),
    ],
)
def test_malformed_lines_are_error_events_at_their_position(raw: str, message: str) -> None:
    ev = parse_line(raw, expected_seq=7)
    assert (ev.seq, ev.type, ev.data) == (7, "error", {"message": message, "kind": "protocol"})


def test_a_long_garbage_line_is_quoted_to_200_characters() -> None:
    ev = parse_line("x" * 1000, expected_seq=0)
    assert ev.data["message"] == f"malformed agent line 0 (not JSON): {'x' * 200!r}"


def test_unknown_types_pass_through_for_the_caller_to_skip() -> None:
    ev = parse_line(line(seq=1, type="heartbeat", load=0.5), expected_seq=1)
    assert (ev.type, ev.data) == ("heartbeat", {"load": 0.5})


def test_event_round_trips_through_its_json() -> None:
    ev = Event(seq=2, type="result", ts=1_790_000_000.5,
               data={"case": {"M": 1}, "metrics": {"x": {"value": 1, "unit": "u"}}})  # fmt: skip
    assert json.loads(ev.to_json()) == {"v": 1, "seq": 2, "type": "result", "ts": 1_790_000_000.5, "case": {"M": 1},
                                        "metrics": {"x": {"value": 1, "unit": "u"}}}  # fmt: skip
    assert parse_line(ev.to_json(), expected_seq=2) == ev
    assert "ts" not in json.loads(Event(seq=0, type="log").to_json())
    with pytest.raises(ValueError):
        Event(seq=0, type="result", data={"x": math.nan}).to_json()  # never write NaN into a line


def test_case_and_case_index_only_of_the_right_types() -> None:
    assert Event(seq=0, type="error", data={"case": [1], "case_index": True}).case is None
    assert Event(seq=0, type="error", data={"case_index": True}).case_index is None
    assert Event(seq=0, type="error", data={"case_index": "1"}).case_index is None
    assert Event(seq=0, type="error", data={"case_index": 0}).case_index == 0


def test_error_event_shape() -> None:
    assert error_event(3, "boom", case={"M": 1}) == Event(
        seq=3, type="error", data={"message": "boom", "case": {"M": 1}}
    )


def test_metric_with_every_statistic() -> None:
    m = {"value": 2, "unit": "ms", "median": 2, "p10": 1.5, "p90": 2.5, "min": 1, "max": 3, "n": 3,
         "samples": [1, 2, 3]}  # fmt: skip
    got = parse_metric("time_ms", m)
    assert got == Metric(2.0, "ms", 2.0, 1.5, 2.5, 1.0, 3.0, 3, [1.0, 2.0, 3.0])
    assert got.to_dict() == {"value": 2.0, "unit": "ms", "median": 2.0, "p10": 1.5, "p90": 2.5, "min": 1.0,
                             "max": 3.0, "n": 3, "samples": [1.0, 2.0, 3.0]}  # fmt: skip
    assert parse_metric("x", {"value": 1, "unit": "u", "median": None, "n": 0}).to_dict() == {
        "value": 1.0, "unit": "u", "n": 0
    }  # fmt: skip


@pytest.mark.parametrize(
    ("m", "message"),
    [
        (5, "metric 'x' must be an object with 'value' and 'unit'"),
        ({"unit": "ms"}, "metric 'x' needs 'value' (number) and 'unit' (string)"),
        ({"value": 1}, "metric 'x' needs 'value' (number) and 'unit' (string)"),
        ({"value": 1, "unit": 5}, "metric 'x' needs 'value' (number) and 'unit' (string)"),
        ({"value": "1", "unit": "ms"}, "metric 'x': value must be a finite number, got '1'"),
        ({"value": True, "unit": "ms"}, "metric 'x': value must be a finite number, got True"),
        ({"value": math.inf, "unit": "ms"}, "metric 'x': value must be a finite number, got inf"),
        ({"value": 1, "unit": "ms", "p90": math.nan}, "metric 'x': p90 must be a finite number, got nan"),
        ({"value": 1, "unit": "ms", "n": -1}, "metric 'x': n must be a non-negative integer"),
        ({"value": 1, "unit": "ms", "n": 1.0}, "metric 'x': n must be a non-negative integer"),
        ({"value": 1, "unit": "ms", "n": True}, "metric 'x': n must be a non-negative integer"),
        ({"value": 1, "unit": "ms", "samples": 3}, "metric 'x': samples must be a list of numbers"),
        ({"value": 1, "unit": "ms", "samples": [1, None]}, "metric 'x': samples[] must be a finite number, got None"),
    ],
)
def test_bad_metrics_name_the_metric_and_the_field(m: Any, message: str) -> None:
    with pytest.raises(ValueError) as exc:
        parse_metric("x", m)
    assert str(exc.value) == message


def test_event_metrics_validates_each_metric() -> None:
    ev = Event(seq=0, type="result", data={"metrics": {"a": {"value": 1, "unit": "u"}, "b": {"value": 2}}})
    with pytest.raises(ValueError, match="metric 'b' needs"):
        ev.metrics()
    with pytest.raises(ValueError, match="result event has no 'metrics' object"):
        Event(seq=0, type="result", data={"metrics": [1]}).metrics()
    ok = Event(seq=0, type="result", data={"metrics": {"a": {"value": 1, "unit": "u"}}})
    assert ok.metrics() == {"a": Metric(1.0, "u")}


def test_bytes_that_are_not_utf8_never_raise() -> None:
    ev = parse_line(b"\xff\xfe{broken", expected_seq=2)
    assert (ev.seq, ev.type, ev.data["kind"]) == (2, "error", "protocol")
    assert ev.data["message"] == "agent line 2 is not UTF-8 (byte 0xff at byte 0); its content is not trusted"
    assert parse_line(b"not json", expected_seq=0).data["message"] == "malformed agent line 0 (not JSON): 'not json'"
    good = parse_line(line(seq=0, type="log", message="caf\u00e9").encode(), expected_seq=0)
    assert good.data == {"message": "caf\u00e9"}


def test_to_json_is_compact() -> None:
    ev = Event(seq=2, type="log", ts=1.5, data={"message": "a b"})
    assert ev.to_json() == '{"v":1,"seq":2,"type":"log","ts":1.5,"message":"a b"}'


def test_event_metrics_message_exact() -> None:
    with pytest.raises(ValueError) as exc:
        Event(seq=0, type="result", data={}).metrics()
    assert str(exc.value) == "result event has no 'metrics' object"


def test_integers_past_64_bits_are_read_exactly_anywhere_in_a_line_and_floats_stay_floats() -> None:
    """orjson reads an integer past 64 bits as a rounded float; such a line is read again exactly (protocol.py
    walks the parsed values when orjson's re-encoding of them holds a "+", the sign of an exponent)."""
    from orchestrator.protocol import parse_line

    def data(body: str) -> dict[str, object]:
        return parse_line('{"v":1,"seq":0,"type":"result",' + body + "}", expected_seq=0).data

    assert data('"x":18446744073709551616')["x"] == 2**64
    assert data('"x":[1,{"y":-99999999999999999999999}]')["x"] == [1, {"y": -99999999999999999999999}]
    assert data('"x":9223372036854775808')["x"] == 2**63  # within orjson's unsigned 64 bits: exact already
    big_float = data('"x":1e19,"y":2.5,"pad":"' + "1" * 40 + '"')
    assert big_float["x"] == 1e19 and isinstance(big_float["x"], float) and big_float["pad"] == "1" * 40
    long_pad = '"pad":"' + "p" * 5000 + '"'
    assert data('"s":"c++ 1e+5","x":18446744073709551616')["x"] == 2**64
    assert data(long_pad + ',"x":[1,{"y":-99999999999999999999999}]')["x"] == [1, {"y": -99999999999999999999999}]
    assert data(long_pad + ',"x":18446744073709551616')["x"] == 2**64
    assert isinstance(data(long_pad + ',"x":1e19')["x"], float)


@pytest.mark.parametrize("exp", range(16, 309))
def test_orjson_writes_every_float_of_1e16_or_more_with_an_exponent(exp: int) -> None:
    # parse_line relies on it to skip the walk for rounded integers: no "+" in orjson's text, no float >= 1e16
    for x in (10.0**exp, 1.7976931348623157e308 if exp == 308 else 9.99 * 10.0**exp, float(2**64)):
        assert b"e+" in orjson.dumps(x) and b"e+" in orjson.dumps(-x)


_JSON_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True), st.text(alphabet=st.characters(codec="utf-8"), max_size=8),
    st.sampled_from(["\x00", "a\x00b", "\ud800", "c++", "1e+19"]),
)  # fmt: skip
_JSON_VALUES = st.recursive(_JSON_LEAVES, lambda inner: st.lists(inner, max_size=3)
                            | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=8)  # fmt: skip


@given(value=_JSON_VALUES)
def test_a_line_parse_line_calls_plain_needs_no_stand_in_and_is_read_exactly(value: object) -> None:
    """``Event.plain`` lets the store skip its storability check (store/storable.py): it must never be set on a
    line with a NUL, a lone surrogate, NaN/Infinity or an integer past 64 bits — and every line is read exactly."""
    line = json.dumps({"v": 1, "seq": 0, "type": "result", "x": value})  # ASCII: "\\ud800" escaped
    ev = parse_line(line.encode(), expected_seq=0)
    assert ev.type == "result"
    assert json.dumps(ev.data["x"]) == json.dumps(value)  # exact: no rounded integer, NaN kept as NaN
    if ev.plain:
        assert storable(ev.data) == (ev.data, [])


@pytest.mark.parametrize(("written", "shown"), [("NaN", "nan"), ("Infinity", "inf"), ("-Infinity", "-inf"),
                                                ("1e400", "inf")])  # fmt: skip
def test_a_ts_that_is_not_finite_is_a_protocol_error(written: str, shown: str) -> None:
    """Issue 19's mutation run: removing the ts finiteness check survived every test."""
    raw = f'{{"v": 1, "seq": 5, "type": "result", "ts": {written}, "case_index": 0, "case": {{"M": 1}}}}'
    ev = parse_line(raw, expected_seq=5)
    assert (ev.seq, ev.type, ev.data["kind"], ev.data["line_type"]) == (5, "error", "protocol", "result")
    assert ev.data["message"] == f"agent line 5 (result): ts must be unix seconds (a finite number), got {shown}"
    assert parse_line(raw.replace(written, "1700000000.25"), expected_seq=5).ts == 1700000000.25


@pytest.mark.parametrize(
    ("raw", "keys"),
    [
        ('{"v": 1, "seq": 2, "type": "result", "case": {"M": 1}, "metrics": {"t": {"value": 1.0, "unit": "ms"}}, '
         '"metrics": {}}', "the key 'metrics'"),
        ('{"v": 1, "seq": 2, "type": "result", "seq": 3, "type": "log"}', "the keys 'seq', 'type'"),
        ('{"v":1,"seq":2,"type":"result","case":{"M":1},"metrics":{"t":{"value":1.0,"unit":"ms"}},"metrics":{}}',
         "the key 'metrics'"),  # compact, as the agent writes
        ('{"v": 1, "seq": 2, "type": "log", "msg": "a", "\\u00e9t\\u00e9": 1, "\\u00e9t\\u00e9": 2}',
         "the key '\u00e9t\u00e9'"),  # escaped as the stdlib writes non-ASCII
        ('{"v": 1, "seq": 2, "type": "log", "msg": "a", "\u00e9t\u00e9": 1, "\u00e9t\u00e9": 2}',
         "the key '\u00e9t\u00e9'"),  # raw UTF-8
        # below the top level (the testers': a metric's value written twice took the last figure silently)
        ('{"v":1,"seq":2,"type":"result","case":{"M":1},"metrics":{"t":{"value":1.0,"value":9.0,"unit":"ms"}}}',
         "the key 'metrics.t.value'"),
        ('{"v":1,"seq":2,"type":"result","case":{"M":1,"M":2},"metrics":{"t":{"value":1.0,"unit":"ms"}}}',
         "the key 'case.M'"),
        ('{"v":1,"seq":2,"type":"result","case":{"M":1},"info":{"rows":[{"b":1},{"b":1,"b":2}]}}',
         "the key 'info.rows[1].b'"),  # in an object inside an array
        ('{"v":1,"seq":2,"type":"result","seq":2,"case":{"M":1},"metrics":{"t":{"n":3,"n":4}}}',
         "the keys 'seq', 'metrics.t.n'"),  # a line's own repeats first
        # whitespace between a key and its colon (a tester's: stored 2.0, completed)
        ('{"v":1,"seq":2,"type":"result","case":{"M":1},"metrics":{"t":{"value" :1.0,"unit":"ms","value" :2.0}}}',
         "the key 'metrics.t.value'"),
        ('{"v":1,"seq":2,"type":"result","case":{"M":1},"metrics":{"t":{"value"\t:1.0,"unit":"ms","value"\n \r:2}}}',
         "the key 'metrics.t.value'"),
        # a repeat whose dropped text is made up by numbers written shorter than orjson writes them (1E1 for 10.0):
        # the line is exactly as long as orjson's compact writing of it (a tester's: stored 2.0, completed)
        ('{"v":1,"seq":2,"type":"result","case":{"M":1},"metrics":{"t":{"value":1.0,"unit":"ms","value":2.0}},'
         '"info":{"a":[' + ",".join(["1E1"] * 12) + "]}}", "the key 'metrics.t.value'"),
    ],
)  # fmt: skip
def test_a_key_written_twice_in_one_object_is_a_protocol_error(raw: str, keys: str) -> None:
    """JSON readers keep the last of a repeated key silently: the line's content is ambiguous, never stored,
    whatever the depth of the object that repeats it."""
    for line_ in (raw, raw.encode()):
        ev = parse_line(line_, expected_seq=2)
        assert (ev.seq, ev.type, ev.data["kind"]) == (2, "error", "protocol")
        assert ev.data["message"] == (
            f"agent line 2 writes {keys} twice in one object; which one is meant is unknown (JSON readers keep "
            "the last), so its content is not trusted"
        )


def test_a_key_repeated_in_different_objects_or_inside_text_is_fine() -> None:
    raw = line(seq=1, type="result", case={"M": 1, "case": 2}, metrics={"type": {"value": 1.0, "unit": "ms"}},
               info={"msg": '"metrics" and "seq" in a message', "inner": {"a": 1}, "other": {"a": 2}})  # fmt: skip
    ev = parse_line(raw, expected_seq=1)
    assert ev.type == "result" and ev.data["case"] == {"M": 1, "case": 2}


def test_count_keys_counts_every_objects_keys_nested_in_objects_and_lists() -> None:
    from orchestrator.protocol import _count_keys

    assert _count_keys({"a": 1, "b": {"c": 1, "d": [{"e": 1}, 2]}, "f": [1, "x", None]}) == 6
    assert _count_keys([{"a": 1}, [{"b": 1, "c": 2}], 3]) == 3
    assert (_count_keys([1, 2.0, "s", True, None]), _count_keys("text"), _count_keys({})) == (0, 0, 0)


def test_the_duplicate_key_screen_reads_a_line_again_only_when_it_must(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hot path: a line with no more ``":`` than keys (after discounting ``\\":`` inside strings) is never
    parsed a second time; one with more is, and a repeat at any depth counts."""
    import orchestrator.protocol as protocol

    reads: list[str] = []
    real_loads = json.loads

    def counting_loads(text: str, **kw: Any) -> Any:
        reads.append(text)
        return real_loads(text, **kw)

    monkeypatch.setattr(protocol.json, "loads", counting_loads)
    quoted = '{"v": 1, "m": "it said \\"x\\": 1"}'  # 3 '":' for 2 keys, one of them escaped in a string
    for text in ('{"v": 1, "a": {"b": 2}}', quoted):
        assert protocol._keys_written_twice(text, real_loads(text)) == [] and reads == [], text
    ev = parse_line('{"v": 1, "seq": 0, "type": "log", "message": "m"}', expected_seq=0)  # not compact: screened
    assert ev.type == "log" and reads == []
    nested = '{"v": 1, "a": {"b": 1, "b": 2}}'  # a repeat below the top level: read again, named by its path
    assert protocol._keys_written_twice(nested, real_loads(nested)) == ["a.b"] and reads == [nested]


_MISMATCH = (
    "a line's seq must be its position in the spool (a gap, a duplicate or a reordered line); its content is not "
    "trusted"
)


@pytest.mark.parametrize(("shift", "pos", "after"), [(0, 4, ""), (2, 6, " (seq 4 expected after 2 blank line(s))")])
def test_a_seq_mismatch_is_an_error_at_the_position_naming_its_case_and_type(shift: int, pos: int, after: str) -> None:
    """Issue 19's mutation run: the mismatch error's fields, its text and the position after blank lines."""
    raw = line(seq=9, type="result", case_index=0, case={"M": 1}, metrics={})
    ev = parse_line(raw, expected_seq=4, shift=shift)
    assert (ev.seq, ev.type) == (pos, "error")
    assert ev.data == {"message": f"agent line {pos} (result) claims seq 9{after}: {_MISMATCH}", "kind": "protocol",
                       "line_type": "result", "case_index": 0, "case": {"M": 1}}  # fmt: skip
    assert parse_line(line(seq=4, type="log", message="m"), expected_seq=4, shift=shift).seq == pos


@pytest.mark.parametrize(
    ("fields", "kept"),
    [
        ({"case_index": 0, "case": {}}, {"case_index": 0, "case": {}}),
        ({"case_index": 1}, {"case_index": 1}),
        ({"case_index": -1, "case": [1]}, {}),
        ({"case_index": True, "case": "M=1"}, {}),
        ({"case_index": 1.0, "case": None}, {}),
    ],
)
def test_a_rejected_line_keeps_only_a_well_typed_case_and_case_index(fields: dict[str, Any],
                                                                     kept: dict[str, Any]) -> None:  # fmt: skip
    """case_fields: an object ``case`` and an integer ``case_index`` >= 0 (0 included, bool excluded) are kept on
    a mismatch's and a bad ts's error; nothing else is."""
    mismatch = parse_line(line(seq=1, type="result", **fields), expected_seq=0)
    assert {k: v for k, v in mismatch.data.items() if k.startswith("case")} == kept
    bad_ts = parse_line(line(seq=0, type="result", ts="soon", **fields), expected_seq=0)
    assert bad_ts.data == {"message": "agent line 0 (result): ts must be unix seconds (a finite number), got 'soon'",
                           "kind": "protocol", "line_type": "result", **kept}  # fmt: skip


@pytest.mark.parametrize(
    ("raw", "plain"),
    [
        ('{"v":1,"seq":0,"type":"log","message":"m"}', True),
        ('{"v":1,"seq":0,"type":"log","message":"a \\"quoted\\" word\\n"}', True),  # backslashes, no NUL
        ('{"v":1,"seq":0,"type":"log","message":"c++ 1e+5","x":2.0}', True),  # a "+" and a whole float < 2**63
        ('{"v":1,"seq":0,"type":"log","message":"a\\u0000b"}', False),
        ('{"v":1,"seq":0,"type":"log","x":NaN}', False),  # read by Python's json, not orjson
        ('{"v":1,"seq":0,"type":"log","x":18446744073709551616}', False),  # past 64 bits: read again
    ],
)
def test_plain_is_true_exactly_when_nothing_needs_a_stand_in(raw: str, plain: bool) -> None:
    """``Event.plain`` is a bool: True only for a line orjson read exactly with no NUL (a "+" in a string, a
    backslash or a small whole float must not cost the store its skipped check)."""
    ev = parse_line(raw, expected_seq=0)
    assert ev.type == "log" and ev.plain is plain


def test_an_integer_just_past_int64_below_zero_is_read_exactly() -> None:
    """orjson reads -2**63-1 as the float -2**63 exactly: the walk must take ``>=`` 2**63, not ``>``."""
    ev = parse_line('{"v":1,"seq":0,"type":"log","x":-9223372036854775809}', expected_seq=0)
    assert ev.data["x"] == -(2**63) - 1 and type(ev.data["x"]) is int


def test_a_compact_ascii_line_is_not_screened_for_repeated_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hot path: a line exactly as long as orjson's re-writing and ASCII (as the agent writes) never reaches
    ``_keys_written_twice``; a spaced or non-ASCII one does."""
    import orchestrator.protocol as protocol

    calls: list[str] = []
    real = protocol._keys_written_twice

    def counting(text: str, doc: dict[str, Any]) -> list[str]:
        calls.append(text)
        return real(text, doc)

    monkeypatch.setattr(protocol, "_keys_written_twice", counting)
    compact = '{"v":1,"seq":0,"type":"log","message":"m"}'
    assert parse_line(compact, expected_seq=0).type == "log" and calls == []
    assert parse_line(compact.replace("m", "\u00e9"), expected_seq=0).type == "log" and len(calls) == 1
    assert parse_line(line(seq=0, type="log", message="m"), expected_seq=0).type == "log" and len(calls) == 2


@pytest.mark.parametrize(
    ("head", "claim"),
    [(b'{"v": 1, "seq" : -12, "type": "result"', " (claiming seq -12)"), (b'{"v":1,"type":"result"', ""),
     (b'{"v":1,"seq":"3"', "")],
)  # fmt: skip
def test_an_oversize_line_is_one_protocol_error_naming_its_size_cap_and_claimed_seq(head: bytes, claim: str) -> None:
    from orchestrator.protocol import oversize_event

    ev = oversize_event(7, 3_000_000, head, 2_000_000)
    assert (ev.seq, ev.type) == (7, "error")
    assert ev.data == {
        "message": f"agent line 7{claim} is 3,000,000 bytes, over orch's cap of 2,000,000 bytes per line; it was not "
        "ingested (a tool's large output belongs in the host's run directory, not in an event)",
        "kind": "protocol",
        "line_bytes": 3_000_000,
    }


@pytest.mark.parametrize("key", ["value", "median", "p10", "p90", "min", "max"])
def test_parse_metric_takes_integers_a_double_holds_and_refuses_the_next_ones(key: str) -> None:
    """protocol.EXACT_INT_MAX: +-2**53 are metrics; +-(2**53 + 1) would be stored as +-2**53."""
    for edge in (2**53, -(2**53)):
        m = parse_metric("b", {"value": 1.0, "unit": "B", key: edge, "samples": [edge, 1]})
        assert getattr(m, key) == edge and m.samples == [edge, 1.0]
    for past in (2**53 + 1, -(2**53) - 1):
        with pytest.raises(ValueError) as exc:
            parse_metric("b", {"value": 1.0, "unit": "B", key: past})
        assert str(exc.value) == (
            f"metric 'b': {key} {past} is an integer past 2**53, which the store's numbers (IEEE 754 doubles) cannot "
            "hold exactly; write it as a float (1.2e19) or in a larger unit"
        )
        with pytest.raises(ValueError, match=rf"^metric 'b': samples\[\] {past} is an integer past 2\*\*53"):
            parse_metric("b", {"value": 1.0, "unit": "B", "samples": [1.0, past]})


def test_a_quote_and_whitespace_before_a_colon_inside_text_is_no_key() -> None:
    raw = '{"v": 1, "seq": 0, "type": "log", "message": "it said \\"x\\" : 1, \\"y\\"\\t: 2"}'
    ev = parse_line(raw, expected_seq=0)
    assert ev.type == "log" and ev.data["message"] == 'it said "x" : 1, "y"\t: 2'


@pytest.mark.parametrize(
    ("metrics", "said"),
    [
        ('{"t\\u0000": {"value": 1.0}, "t\u2400": {"value": 2.0}}', "'t\\x00' and 't\u2400'"),
        ('{"t\u2400": {"value": 2.0}, "t\\u0000": {"value": 1.0}}', "'t\\x00' and 't\u2400'"),
        ('{"a\\u0000\u2400": 1, "a\u2400\\u0000": 2}', "'a\u2400\\x00' and 'a\\x00\u2400'"),
    ],
)
def test_two_keys_one_once_nul_is_stored_as_u2400_are_unholdable(metrics: str, said: str) -> None:
    """A tester's: ``t\\u0000`` next to ``t\u2400`` were both stored under ``t\u2400`` (PostgreSQL holds no NUL),
    one metric dropped silently, run completed."""
    from orchestrator.protocol import unholdable_problem

    ev = parse_line(f'{{"v": 1, "seq": 3, "type": "result", "case": {{"M": 1}}, "metrics": {metrics}}}', expected_seq=3)
    problem = unholdable_problem(ev.data)
    assert problem is not None and f"the keys {said} of metrics would both be stored as " in problem, problem
    assert unholdable_problem({"metrics": {"t\x00": 1, "u\u2400": 2}}) is None
