"""store/storable.py on its own: each stand-in, the sentence naming it, and the value returned untouched (the same
object) when nothing needs one — the pure half of tests/integration/test_store_storable.py, which stores the same
values on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from orchestrator.protocol import Event, parse_line
from orchestrator.store.storable import INT64_MIN, UINT64_MAX, _plain, storable, storable_event


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1, "b": [1.5, "x", True, False], "c": {"d": "e\\u0000"}},  # a backslash, but no NUL
        ["plain", 0, 2**63 - 1, 2**63, UINT64_MAX, INT64_MIN, -0.0],
        {"n": None, "l": [None, 1]},  # a null: looked at closer, nothing to change
        {"t": True, "f": False, "z": 0},
        {1: "a non-string key"},  # only Python builds these; json.loads never does
        "text",
        "",
    ],
)
def test_a_value_needing_no_stand_in_is_returned_as_the_same_object(value: Any) -> None:
    out, notes = storable(value)
    assert out is value and notes == []


@pytest.mark.parametrize(
    ("value", "want", "notes"),
    [
        ("a\x00b\x00", "a\u2400b\u2400", ["line: 2 NUL (U+0000) stored as U+2400 (\u2400)"]),
        ("\ud800x\udfff", "\ufffdx\ufffd", ["line: 2 lone surrogate(s) stored as U+FFFD"]),
        ("\x00\ud800", "\u2400\ufffd", ["line: 1 NUL (U+0000) stored as U+2400 (\u2400)",
                                        "line: 1 lone surrogate(s) stored as U+FFFD"]),
        (UINT64_MAX + 1, str(UINT64_MAX + 1), ["line: an integer beyond 64 bits stored as its decimal text"]),
        (INT64_MIN - 1, str(INT64_MIN - 1), ["line: an integer beyond 64 bits stored as its decimal text"]),
        (math.nan, "NaN", ["line: NaN (not a JSON number) stored as the string 'NaN'"]),
        (math.inf, "Infinity", ["line: Infinity (not a JSON number) stored as the string 'Infinity'"]),
        (-math.inf, "-Infinity", ["line: -Infinity (not a JSON number) stored as the string '-Infinity'"]),
    ],
)  # fmt: skip
def test_each_stand_in_and_its_sentence(value: Any, want: Any, notes: list[str]) -> None:
    assert storable(value) == (want, notes)


def test_the_64_bit_bounds_are_kept_as_integers() -> None:
    """orjson's range, -2**63 .. 2**64 - 1: kept as numbers (the JSON columns of both engines hold them)."""
    value = [INT64_MIN, UINT64_MAX, INT64_MIN - 1, UINT64_MAX + 1, True, None]
    out, notes = storable(value, "line 3")
    assert out == [INT64_MIN, UINT64_MAX, str(INT64_MIN - 1), str(UINT64_MAX + 1), True, None]
    assert type(out[0]) is int and type(out[1]) is int and out[4] is True
    assert notes == [
        "line 3[2]: an integer beyond 64 bits stored as its decimal text",
        "line 3[3]: an integer beyond 64 bits stored as its decimal text",
    ]


@pytest.mark.parametrize("big", [2**63, UINT64_MAX])
def test_an_unsigned_64_bit_integer_is_kept_whether_or_not_its_line_needs_a_stand_in(big: int) -> None:
    """A line with only such an integer is "plain" (orjson writes it; protocol.parse_line and ``_plain`` agree), so
    it is stored as a number; it stays a number when a NUL elsewhere in its line makes storable walk the line."""
    line = json.dumps({"v": 1, "seq": 0, "type": "result", "info": {"u": big}})
    assert parse_line(line.encode(), expected_seq=0).plain
    assert storable({"u": big}) == ({"u": big}, [])
    out, notes = storable({"u": big, "s": "\x00"})
    assert out == {"u": big, "s": "\u2400"} and type(out["u"]) is int
    assert notes == ["line.s: 1 NUL (U+0000) stored as U+2400 (\u2400)"]


def test_paths_name_keys_and_indexes_and_a_changed_key_by_its_first_40_characters() -> None:
    long_key = "k" * 50 + "\x00"
    value = {"ok": [1, 2], "info": {"tail": ["a", "b\x00"]}, long_key: 1, 7: math.nan}
    out, notes = storable(value, "line 9")
    assert out == {"ok": [1, 2], "info": {"tail": ["a", "b\u2400"]}, "k" * 50 + "\u2400": 1, 7: "NaN"}
    assert notes == [
        "line 9.info.tail[1]: 1 NUL (U+0000) stored as U+2400 (\u2400)",
        f"line 9 key {'k' * 40!r}: 1 NUL (U+0000) stored as U+2400 (\u2400)",
        "line 9.7: NaN (not a JSON number) stored as the string 'NaN'",
    ]


def test_unchanged_parts_of_a_changed_value_are_the_same_objects() -> None:
    same_list, same_dict = [1, "x"], {"a": [2]}
    value = {"l": same_list, "d": same_dict, "bad": "\x00"}
    out, _ = storable(value)
    assert out is not value and value["bad"] == "\x00"  # the input is not changed in place
    assert out["l"] is same_list and out["d"] is same_dict


@pytest.mark.parametrize(("position", "tail"), [(0, ["\x00", "b"]), (1, ["a", "\x00"])])
def test_a_list_with_a_change_at_any_position_is_a_new_list(position: int, tail: list[str]) -> None:
    out, notes = storable({"x": tail, "n": None})
    assert out["x"] == [c.replace("\x00", "\u2400") for c in tail]
    assert len(notes) == 1 and notes[0].startswith(f"line.x[{position}]: ")


def test_a_changed_key_alone_makes_a_new_dict() -> None:
    out, notes = storable({"a\x00": 1, "b": 2})
    assert out == {"a\u2400": 1, "b": 2} and list(out) == ["a\u2400", "b"]
    assert notes == ["line key 'a\\x00': 1 NUL (U+0000) stored as U+2400 (\u2400)"]


def test_a_changed_value_alone_makes_a_new_dict() -> None:
    out, notes = storable({"a": 1, "b": 2**70})
    assert out == {"a": 1, "b": str(2**70)}
    assert notes == ["line.b: an integer beyond 64 bits stored as its decimal text"]


def test_an_event_parse_line_called_plain_is_not_looked_at() -> None:
    ev = Event(seq=4, type="result", data={"case": {"n": "\x00"}}, plain=True)
    assert storable_event(ev) == (ev, []) and storable_event(ev)[0] is ev


def test_an_event_with_nothing_to_change_is_returned_as_is() -> None:
    ev = Event(seq=4, type="result", data={"case": {"n": None}})
    out, notes = storable_event(ev)
    assert out is ev and notes == []


@pytest.mark.parametrize(
    ("typ", "info", "want_info"),
    [
        ("result", {"tool": "x"}, {"tool": "x"}),
        ("error", None, {}),
        ("result", ["not", "an", "object"], {}),
    ],
)
def test_a_result_or_error_rows_info_names_its_stand_ins(typ: str, info: Any, want_info: dict[str, Any]) -> None:
    data: dict[str, Any] = {"case": {"n": "a\x00"}, "message": "m"}
    if info is not None:
        data["info"] = info
    ev = Event(seq=7, type=typ, ts=12.5, v=1, data=data)
    out, notes = storable_event(ev)
    assert notes == ["line 7.case.n: 1 NUL (U+0000) stored as U+2400 (\u2400)"]
    assert (out.seq, out.type, out.ts, out.v) == (7, typ, 12.5, 1)
    assert out.data == {**data, "case": {"n": "a\u2400"}, "info": {**want_info, "stored_as": notes}}
    assert ev.data["case"] == {"n": "a\x00"}  # the event read is not changed


@pytest.mark.parametrize("typ", ["log", "hello", "done", "case_start"])
def test_a_host_level_lines_stand_ins_are_returned_not_put_in_its_data(typ: str) -> None:
    ev = Event(seq=2, type=typ, ts=None, data={"message": "x\x00", "info": {"a": 1}})
    out, notes = storable_event(ev)
    assert notes == ["line 2.message: 1 NUL (U+0000) stored as U+2400 (\u2400)"]
    assert out == Event(seq=2, type=typ, ts=None, data={"message": "x\u2400", "info": {"a": 1}})


@pytest.mark.parametrize(
    ("value", "plain"),
    [
        ({"a": 1, "b": ["x", 2.5, True]}, True),
        ({1: "a key that is not a string"}, True),  # OPT_NON_STR_KEYS: Python-built dicts stay on the fast path
        ({"path": "C:\\dir", "q": '"quoted"'}, True),  # a backslash in the JSON text, but no NUL
        ({"s": "\x00"}, False),
        ({"n": None}, False),  # written "null": looked at closer (NaN is written so too)
        ({"f": math.nan}, False),
        ({"s": "\ud800"}, False),  # orjson refuses a lone surrogate
        ({"i": 2**64}, False),  # and an integer past its range
    ],
)
def test_orjson_alone_decides_whether_a_value_is_plain(value: Any, plain: bool) -> None:
    """``_plain`` is the ingest hot path: one orjson.dumps decides, and only a value it cannot vouch for is walked."""
    assert _plain(value) is plain


def test_a_plain_value_is_never_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    def walk(*_: Any) -> Any:
        raise AssertionError("walked a plain value")

    monkeypatch.setattr("orchestrator.store.storable._walk", walk)
    value = {"a": [1, "b\\c"], 2: 3.5}
    assert storable(value) == (value, [])
