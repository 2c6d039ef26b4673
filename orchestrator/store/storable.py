"""Values both engines store alike: what PostgreSQL (or the JSON encoder) refuses becomes a visible stand-in — pure.

An agent line is JSON that Python reads fine, but some of its values cannot be stored as they are:

- U+0000 (NUL) in a string: PostgreSQL ``text``, ``json`` and ``jsonb`` cannot hold it ("unsupported Unicode escape
  sequence", PostgreSQL docs §8.14 "JSON Types"); SQLite takes it. It is stored as U+2400 SYMBOL FOR NULL (``␀``).
- a lone UTF-16 surrogate (``"\\ud800"`` in the JSON text, valid JSON but not a Unicode scalar value): no UTF-8
  encoder writes it (orjson and psycopg refuse it on both engines). Stored as U+FFFD REPLACEMENT CHARACTER — for
  values that reach the store by other paths: an agent line holding one is refused whole before it gets here
  (``ingest.SpoolLines``, ``protocol.unholdable_problem``: one error row), as are numbers past a double's range.
- an integer below -2**63 or above 2**64 - 1: orjson refuses it (SQLite's JSON column). Stored as its decimal
  text. Up to 2**64 - 1 (unsigned 64-bit) orjson writes it, so a line holding one is "plain" (``_plain``,
  ``protocol.parse_line``) and its JSON keeps the number on both engines — ``_walk`` keeps it too, so a value is
  stored the same whether or not something else in its line needed a stand-in; the indexed ``bigint`` columns
  take a signed 64-bit value only (``compute.typed_axis`` leaves them NULL beyond).
- NaN and ±Infinity (Python's ``json`` reads ``NaN``/``Infinity``): not JSON; orjson writes ``null`` and PostgreSQL
  ``jsonb`` refuses them. Stored as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.

Nothing is dropped: each change is named (where in the line, what, how many) so the stored row says so
(``results.info.stored_as``; a host-level line's changes go to the host run's log).
"""

from __future__ import annotations

import math
import re
from typing import Any

import orjson

from orchestrator.protocol import NUL_STORED_AS, Event

NUL_STAND_IN = NUL_STORED_AS  # U+2400 SYMBOL FOR NULL
SURROGATE_STAND_IN = "\ufffd"  # REPLACEMENT CHARACTER
INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1  # the integers orjson writes (its int range)
_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")
_SURROGATES = re.compile("[\ud800-\udfff]")


def _text(s: str, where: str, notes: list[str]) -> str:
    if not _BAD_CHARS.search(s):  # the common case: one scan, no copy
        return s
    nul = s.count("\x00")
    if nul:
        s = s.replace("\x00", NUL_STAND_IN)
        notes.append(f"{where}: {nul} NUL (U+0000) stored as U+2400 ({NUL_STAND_IN})")
    s, lone = _SURROGATES.subn(SURROGATE_STAND_IN, s)
    if lone:
        notes.append(f"{where}: {lone} lone surrogate(s) stored as U+FFFD")
    return s


def storable(value: Any, where: str = "line") -> tuple[Any, list[str]]:
    """``value`` (a JSON value as ``json.loads`` returns it: dict, list, str, int, float, bool, None) with every
    string, key and number made storable on SQLite and PostgreSQL alike, and the changes as short sentences
    naming their path (``where.key[3]``). ``value`` itself is returned (not copied) when nothing changes."""
    if _plain(value):
        return value, []
    notes: list[str] = []
    out = _walk(value, where, notes)
    return out, notes


def _plain(value: Any) -> bool:
    """True when nothing in ``value`` needs a stand-in, decided by orjson in C (the ingest hot path): it refuses
    surrogates and integers past 64 bits, escapes NUL as ``\\u0000`` and writes NaN/Infinity as ``null`` (so a
    ``null`` anywhere means: look closer)."""
    try:
        text = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:
        return False
    # a backslash first: memchr finds or rules one out in microseconds, while CPython's search for "\\u0000"
    # took ~9 ms on a 2 MB line (more than parsing it); NUL is written "\\u0000", so no backslash, no NUL
    return not (b"\\" in text and b"\\u0000" in text) and b"null" not in text


def _walk(value: Any, where: str, notes: list[str]) -> Any:
    if isinstance(value, str):
        return _text(value, where, notes)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if INT64_MIN <= value <= UINT64_MAX:
            return value
        notes.append(f"{where}: an integer beyond 64 bits stored as its decimal text")
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        text = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        notes.append(f"{where}: {text} (not a JSON number) stored as the string {text!r}")
        return text
    if isinstance(value, dict):
        changed = False
        out: dict[Any, Any] = {}
        for k, v in value.items():
            key = _text(k, f"{where} key {k[:40]!r}", notes) if isinstance(k, str) else k
            new = _walk(v, f"{where}.{key}", notes)
            changed = changed or key is not k or new is not v
            out[key] = new
        return out if changed else value
    if isinstance(value, list):
        items = [_walk(v, f"{where}[{i}]", notes) for i, v in enumerate(value)]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


def storable_event(ev: Event) -> tuple[Event, list[str]]:
    """``ev`` with its fields made storable (:func:`storable`) and the changes as sentences naming the line
    (``line 7.info.output_tail: 1 NUL (U+0000) stored as U+2400 (␀)``). A ``result`` or ``error`` line's changes
    are also kept in its row's ``info.stored_as``; the caller puts a host-level line's into the host run's log."""
    if ev.plain:  # parse_line saw nothing that needs a stand-in
        return ev, []
    data, notes = storable(ev.data, f"line {ev.seq}")
    if not notes:
        return ev, []
    if ev.type in ("result", "error"):
        info = data.get("info")
        data = {**data, "info": {**(info if isinstance(info, dict) else {}), "stored_as": notes}}
    return Event(seq=ev.seq, type=ev.type, ts=ev.ts, v=ev.v, data=data), notes
