"""The versioned JSON-line event schema spoken by the agent (``agents/orch_agent``) — pure.

One JSON object per line::

    {"v": 1, "seq": int, "type": "hello|case_start|result|log|error|done", "ts": unix seconds, ...}

``seq`` is the 0-based line number in the host's spool file (``~/.orch/runs/<run_id>/<host>/events.jsonl``), so a
follower that has ingested up to ``seq`` resumes with ``--from seq+1``, and a corrupted line still has a seq.
orch counts positions itself and checks each line's ``seq`` against its position (:func:`parse_line`): a line
whose seq disagrees is stored as a protocol error at its position, never under the seq it claims.

Per type (fields beyond these are kept in ``Event.data`` untouched):

- ``hello``: ``agent_version`` (sha256 of agent.pyz), ``run_id``, ``host`` (the host's inventory name, as orch
  named its run directory; absent in spools of older agents), ``suite``, ``facts`` (host facts), ``cases_total``.
- ``case_start``: ``case_index``, ``case`` (parameters).
- ``result``: ``case_index``, ``case`` (parameters), ``metrics``: name -> ``{"value", "unit", "median", "p10",
  "p90", "min", "max", "n", "samples"}`` (only ``value`` and ``unit`` required), ``info`` (free-form).
- ``log``: ``level``, ``message``.
- ``error``: ``message``, and ``case_index``/``case`` when it belongs to a case.
- ``done``: ``status`` (``completed|failed|cancelled``), ``counts``: ``lines`` (spool lines before ``done``),
  ``results``, ``errors`` — the agent's own tally, which orch reconciles with what it stored.
"""

from __future__ import annotations

import json
import math
import re
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import orjson

PROTOCOL_VERSION = 1
EVENT_TYPES = frozenset({"hello", "case_start", "result", "log", "error", "done"})
"""Every type the agent writes (``agents/orch_agent``: ``spool.append``; tests/unit/test_ingest_cases.py holds the
agent to it). A line of another type is an error row (``ingest.SpoolLines``): orch deploys the agent itself."""
METRIC_STAT_KEYS = ("median", "p10", "p90", "min", "max", "n")
EXACT_INT_MAX = 2**53
"""The largest magnitude up to which every integer is a double exactly (IEEE 754 binary64: a 53-bit significand).
The store keeps every metric number (value, statistics, samples) as a double, so an integer metric past it would be
stored with its low digits invented (2**63 - 1 as 9223372036854775808): one rule, for the agent's lines
(``parse_metric``, ``store/compute.clean_metrics``) and for the parsers of tools' output (``parsers/base.py``),
refuses such an integer instead. A float is taken as it is (it is a double already)."""
TS_MIN = 946_684_800.0
"""The earliest ``ts`` orch takes: 2000-01-01T00:00:00Z in unix seconds. No agent of orch ran before it; an
earlier ts is a host whose clock was never set (1970) or a line that was changed."""
TS_AHEAD_S = 86_400.0
"""How far past orch's own clock a line's ``ts`` may be (1 day, in seconds): room for a host clock that is off by
hours (NTP not yet synced, a wrong time zone set as UTC), not for a line dated years ahead. The agent writes
``time.time()`` of its host (``agents/orch_agent/spool.py``); the store turns ts into the time of a result or error
row and, on import, the run's start: a ts past year 9999 crashed the import, and one in year 5138 sorted the run
first in ``orch runs list``."""
JUDGED_KEY = "agent_result"
"""``info`` key of an error row that orch made from the agent's ``result`` line (a suite's parser judged the tool's
output, ``suites/command.py``, or the line's metrics broke the rules above, ``ingest.SpoolLines``): the agent counted
it as a result, so the host's reconciliation (``ingest.reconcile``) counts it on the agent's results side — the
line is stored, nothing is lost, the case failed. ``info.error_kind`` keeps why (``parse``, ``invalid``,
``requests``), where the API and ``--json`` show it."""


def inexact_int_problem(name: str, key: str, x: int) -> str:
    """The sentence for an integer metric number past :data:`EXACT_INT_MAX` (``key``: value, a statistic, or
    ``samples[]``)."""
    # str() of an int past 4300 digits raises (sys.get_int_max_str_digits): a huge one is shown by its size
    shown = str(x) if -(10**40) < x < 10**40 else f"of ~{int(x.bit_length() * 0.30103) + 1} digits"
    return (f"metric {name!r}: {key} {shown} is an integer past 2**53, which the store's numbers (IEEE 754 doubles) "
            "cannot hold exactly; write it as a float (1.2e19) or in a larger unit")  # fmt: skip


@dataclass(frozen=True)
class Metric:
    """One measured quantity. ``value`` is the headline figure (the median when samples exist)."""

    value: float
    unit: str
    median: float | None = None
    p10: float | None = None
    p90: float | None = None
    min: float | None = None
    max: float | None = None
    n: int | None = None
    samples: list[float] | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"value": self.value, "unit": self.unit}
        for k in (*METRIC_STAT_KEYS, "samples"):
            v = getattr(self, k)
            if v is not None:
                d[k] = v
        return d


@dataclass(slots=True)
class Event:
    """A parsed agent line. ``data`` holds every field but ``v``, ``seq``, ``type``, ``ts``.

    Treated as immutable (an event that changes is built anew; the one exception: ``ingest.SpoolLines`` sets
    ``clean_metrics`` on the event ``parse_line`` just returned to it, before anyone else holds it), but not declared
    ``frozen``: a frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``, 1.5 us against
    0.3 us here, and the ingest path builds up to two events per agent line (``bench/ingest.py``, 200 B lines:
    ~2.5 us of ~10 us per line)."""

    seq: int
    type: str
    ts: float | None = None
    v: int = PROTOCOL_VERSION
    data: dict[str, Any] = field(default_factory=dict)
    # What ingest already knows of ``data`` (never part of equality): ``plain`` when parse_line saw that nothing
    # in it needs a stand-in to be stored (store/storable.py); ``clean_metrics``: a result's metrics as
    # linecheck validated them (store/compute.clean_metrics), so the store does not check them again. An event
    # built from changed data (runner.enrich_event) has neither.
    plain: bool = field(default=False, compare=False, repr=False)
    clean_metrics: tuple[dict[str, dict[str, Any]], dict[str, list[float | int]] | None] | None = field(
        default=None, compare=False, repr=False
    )

    @property
    def case(self) -> dict[str, Any] | None:
        c = self.data.get("case")
        return c if isinstance(c, dict) else None

    @property
    def case_index(self) -> int | None:
        ci = self.data.get("case_index")
        return ci if isinstance(ci, int) and not isinstance(ci, bool) else None

    def metrics(self) -> dict[str, Metric]:
        """The ``result`` event's metrics, validated. Raises ValueError on a malformed metric."""
        raw = self.data.get("metrics")
        if not isinstance(raw, dict):
            raise ValueError("result event has no 'metrics' object")
        return {str(name): parse_metric(str(name), m) for name, m in raw.items()}

    def to_json(self) -> str:
        doc: dict[str, Any] = {"v": self.v, "seq": self.seq, "type": self.type}
        if self.ts is not None:
            doc["ts"] = self.ts
        doc.update(self.data)
        return json.dumps(doc, separators=(",", ":"), allow_nan=False)


def _num(name: str, key: str, x: Any) -> float:
    if isinstance(x, int) and not isinstance(x, bool) and not -EXACT_INT_MAX <= x <= EXACT_INT_MAX:
        raise ValueError(inexact_int_problem(name, key, x))  # first: isfinite() of a huge int raises
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"metric {name!r}: {key} must be a finite number, got {x!r:.80}")
    return float(x)


def parse_metric(name: str, m: Any) -> Metric:
    """Validate one metric object; raises ValueError naming the metric and the bad field (an integer past
    :data:`EXACT_INT_MAX` is one)."""
    if not isinstance(m, dict):
        raise ValueError(f"metric {name!r} must be an object with 'value' and 'unit'")
    if "value" not in m or "unit" not in m or not isinstance(m["unit"], str):
        raise ValueError(f"metric {name!r} needs 'value' (number) and 'unit' (string)")
    stats: dict[str, Any] = {}
    for k in ("median", "p10", "p90", "min", "max"):
        if m.get(k) is not None:
            stats[k] = _num(name, k, m[k])
    if m.get("n") is not None:
        if isinstance(m["n"], bool) or not isinstance(m["n"], int) or m["n"] < 0:
            raise ValueError(f"metric {name!r}: n must be a non-negative integer")
        stats["n"] = m["n"]
    samples = m.get("samples")
    if samples is not None:
        if not isinstance(samples, list):
            raise ValueError(f"metric {name!r}: samples must be a list of numbers")
        stats["samples"] = [_num(name, "samples[]", s) for s in samples]
    return Metric(value=_num(name, "value", m["value"]), unit=m["unit"], **stats)


class Unholdable(float):
    """A JSON number literal outside what an IEEE 754 double holds, read by :func:`parse_line`'s exact reader in
    place of the number: past its range (magnitude above ``sys.float_info.max``, about 1.8e308: ``1e400``, an
    integer of 309 or more digits; +/-inf as a float), or ``below`` it (``tiny``: a non-zero literal that rounds
    to zero, under the smallest subnormal double, about 4.9e-324: ``1e-400``, ``0.`` and 400 zeros and a 1;
    +/-0.0 as a float). It keeps the literal's ``text`` (cut to 40 characters) and its ``digits`` count.
    :func:`unholdable_problem` refuses the line holding one; nothing stores it (a stored 0 would be a number the
    agent never wrote)."""

    text: str
    digits: int
    tiny: bool

    def __new__(cls, literal: str, tiny: bool = False) -> Unholdable:
        sign = -1.0 if literal.startswith("-") else 1.0
        self = super().__new__(cls, sign * (0.0 if tiny else math.inf))
        self.text = literal if len(literal) <= 40 else literal[:20] + "..." + literal[-10:]
        self.digits = sum(c.isdigit() for c in literal)
        self.tiny = tiny
        return self


_FLOAT_MAX_INT = int(sys.float_info.max)


def exact_int(literal: str) -> int | Unholdable:
    """``parse_int`` for Python's json: the exact integer, or :class:`Unholdable` past a double's range (so a
    literal longer than ``sys.get_int_max_str_digits()``, 4300 digits, is refused as a number, not read)."""
    if len(literal) > 310:  # 309 digits and a sign at most below float max: no int() of thousands of digits
        return Unholdable(literal)
    value = int(literal)
    return value if -_FLOAT_MAX_INT <= value <= _FLOAT_MAX_INT else Unholdable(literal)


_NONZERO_MANTISSA = re.compile(r"[1-9]")


def checked_float(literal: str) -> float:
    """``float(literal)`` that names what a double cannot hold (``parse_float`` for Python's json; the parsers
    of engine output read their numbers with it): ``1e400`` overflows a double to inf, and ``1e-400`` underflows
    it to 0.0 though the literal is not zero; both come back as :class:`Unholdable`. Raises ValueError when
    ``literal`` is not a number."""
    value = float(literal)
    if math.isinf(value):
        return Unholdable(literal)
    if value == 0.0 and _NONZERO_MANTISSA.search(literal.split("e")[0].split("E")[0]):
        return Unholdable(literal, tiny=True)
    return value


_ZERO_FLOAT_BEFORE = frozenset(b":,[-")
_ZERO_FLOAT_AFTER = frozenset(b",]}")


def _maybe_tiny(packed: bytes) -> bool:
    """Whether orjson may have read a non-zero number literal as 0.0 (``1e-400``, a double holds it only as 0):
    ``packed`` (orjson's writing of what it read) holds a float zero, written ``0.0`` between ``:``/``,``/``[``/``-``
    and ``,``/``]``/``}``. The line is then read again by :func:`exact_json`, which tells a zero written as zero
    from one that was not. Looks at each ``0.0`` only (``10.05`` is passed over at its first byte) and never runs
    a regex over the line: one ``bytes.find`` over a 2 MB line costs ~0.1 ms, a regex ~10-20 ms."""
    i = packed.find(b"0.0")
    while i >= 0:
        end = i + 3
        if (i == 0 or packed[i - 1] in _ZERO_FLOAT_BEFORE) and (end == len(packed) or packed[end] in _ZERO_FLOAT_AFTER):
            return True
        i = packed.find(b"0.0", i + 3)
    return False


def exact_json(text: str) -> Any:
    """``text`` read by Python's json, exactly: integers as ints, a number past a double's range as
    :class:`Unholdable`; raises ValueError on text that is not JSON."""
    return json.loads(text, parse_int=exact_int, parse_float=checked_float)


_SURROGATE = re.compile("[\ud800-\udfff]")


# what the store keeps in place of U+0000 (store/storable.py NUL_STAND_IN: U+2400 SYMBOL FOR NULL)
NUL_STORED_AS = "\u2400"


def unholdable_problem(value: Any, where: str = "") -> str | None:
    """The first place in ``value`` (a JSON value as :func:`exact_json` reads it) that no store can hold as
    written, as a sentence naming the field by its path (``metrics.wall_ms.value``, ``case.M``,
    ``counts.results``, ``a key of case``); None when there is none. Two kinds:

    - a number past the range of a double (:class:`Unholdable`): no column stores it, and ``float()`` of it
      raises (OverflowError) or makes it inf; or a non-zero number below the smallest double (``1e-400``), which
      a double holds only as 0;
    - a string or key holding a lone UTF-16 surrogate (``"\\ud800"`` in the JSON text: valid JSON, but not a
      Unicode scalar value, so no UTF-8 encoder writes it, RFC 8259 §8.2) — storing it would mean replacing it;
    - two keys of one object that are one key once each NUL is stored as U+2400 (``store/storable.py``: PostgreSQL
      holds no NUL), ``"t\\u0000"`` next to ``"t\u2400"``: one of the two values would be dropped.

    Walks the whole value; the ingest path calls it only for lines read by :func:`exact_json` (``Event.plain``
    false): orjson refuses the first kind and surrogates, and :func:`parse_line` reads a line again exactly when
    :func:`_maybe_tiny` says it may hold a number orjson rounded to 0.0."""
    if isinstance(value, str):
        return f"{where or 'the line'} holds a lone surrogate (a \\u escape of U+D800..U+DFFF), which is not text" \
            if _SURROGATE.search(value) else None  # fmt: skip
    if isinstance(value, Unholdable):
        digits = f" ({value.digits:,} digits)" if "..." in value.text else ""
        if value.tiny:
            return (f"{where or 'a number'} is {value.text}{digits}, not zero but below the smallest double "
                    "(4.9e-324): it would be stored as 0, a number the agent did not write")  # fmt: skip
        return (f"{where or 'a number'} is {value.text}{digits}, past the range of a double (±1.8e308), which no "
                "store can hold")  # fmt: skip
    if isinstance(value, dict):
        stored_as: dict[str, str] = {}  # a key holding NUL -> the key it is stored as
        for k, v in value.items():
            if isinstance(k, str) and _SURROGATE.search(k):
                return f"a key of {where or 'the line'} ({k[:40]!r}) holds a lone surrogate, which is not text"
            if isinstance(k, str) and "\x00" in k:
                same = k.replace("\x00", NUL_STORED_AS)
                other = same if same in value else stored_as.get(same)
                if other is not None:
                    return (f"the keys {k[:40]!r} and {other[:40]!r} of {where or 'the line'} would both be stored as "
                            f"{same[:40]!r} (a NUL is stored as U+2400): one of their values would be lost")
                stored_as[same] = k
            problem = unholdable_problem(v, f"{where}.{k}" if where else str(k))
            if problem is not None:
                return problem
    elif isinstance(value, list):
        for i, v in enumerate(value):
            problem = unholdable_problem(v, f"{where}[{i}]")
            if problem is not None:
                return problem
    return None


def ts_problem(ts: float, now: float | None = None) -> str:
    """The sentence for a ``ts`` outside :data:`TS_MIN` .. ``now`` + :data:`TS_AHEAD_S` (``now``: unix seconds,
    default the clock), naming the date it would be (when a datetime holds it) and the accepted range."""
    now = time.time() if now is None else now
    try:
        when = f" ({datetime.fromtimestamp(ts, timezone.utc):%Y-%m-%d %H:%M:%S} UTC)"
    except (OverflowError, OSError, ValueError):
        when = " (outside the years 1-9999)"
    latest = datetime.fromtimestamp(now + TS_AHEAD_S, timezone.utc)
    return (
        f"ts {ts!r}{when} is outside the accepted range of ts, unix seconds from {TS_MIN:.0f} "
        f"(2000-01-01 00:00:00 UTC) to {now + TS_AHEAD_S:.0f} ({latest:%Y-%m-%d %H:%M:%S} UTC, orch's clock + "
        "1 day): the host's clock is wrong or the line was changed; its content is not trusted"
    )


def error_event(seq: int, message: str, **extra: Any) -> Event:
    return Event(seq=seq, type="error", data={"message": message, **extra})


_FLOAT_PAST_INT64 = float(2**63)


def _maybe_rounded_int(value: Any) -> bool:
    """Whether orjson may have read an integer past 64 bits in ``value`` (it reads one as a float, silently
    rounded): some float in it is whole and at least 2**63 in size. A line holding one is read again with Python's
    json (exact). Walks the values, not the text: a regex over a 2 MB line cost more than parsing it."""
    if isinstance(value, float):
        return abs(value) >= _FLOAT_PAST_INT64 and value.is_integer()
    if isinstance(value, dict):
        return any(_maybe_rounded_int(v) for v in value.values())
    if isinstance(value, list):
        return any(_maybe_rounded_int(v) for v in value)
    return False


def parse_line(line: str | bytes, *, expected_seq: int, shift: int = 0) -> Event:
    """Parse one agent line, found at position ``expected_seq + shift`` (0-based) of the spool, into an Event;
    never raises. ``shift``: blank lines before it in the spool (each one error row, ``ingest.SpoolLines``), so
    the seq the agent wrote is ``expected_seq``; every event and error is stored at the position.

    The event's seq is always that position: orch never takes a seq from a line's content. A line that is not a
    JSON object, has the wrong protocol version, lacks ``seq``/``type``, or whose ``seq`` is not its position (a
    gap, a duplicate, a reordered or foreign line) becomes an ``error`` event (``kind: protocol``) at that
    position carrying the reason — the store keeps it as one error row. A mismatched line's ``case`` and
    ``case_index`` are kept on the error so the row names its case, and ``line_type`` says what it claimed to be.
    Unknown types are returned as they are (parsing is stateless); ``ingest.SpoolLines`` makes a line of a type
    not in :data:`EVENT_TYPES`, and a ``hello`` after line 0, one protocol error row at its position.
    """
    pos = expected_seq + shift
    if type(line) is bytes:
        ev = _parse_compact(line, pos, expected_seq, shift)
        if ev is not None:
            return ev
    plain = False
    packed = b""
    if isinstance(line, bytes):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:  # never stored with replacement characters in place of the bytes
            return error_event(
                pos,
                f"agent line {pos} is not UTF-8 (byte 0x{line[exc.start]:02x} at byte {exc.start}); "
                "its content is not trusted",
                kind="protocol",
            )
    else:
        text = line
    text = text.strip()
    try:
        doc = orjson.loads(text)  # the ingest hot path: orjson parses a result line ~3x faster than json
    except ValueError:  # orjson.JSONDecodeError is a ValueError (also for text that is not valid UTF-8)
        try:  # what Python's json reads and orjson refuses: NaN and integers past 64 bits are kept (the store
            doc = exact_json(text)  # names a stand-in, store/storable.py); numbers past a double's range and
            # lone surrogates are refused by ingest.SpoolLines (unholdable_problem)
        except ValueError:
            return error_event(pos, f"malformed agent line {pos} (not JSON): {text[:200]!r}", kind="protocol")
    else:
        # One orjson.dumps of what was read (0.4 us for a 200 B line) answers both questions the hot path asks.
        # orjson reads an integer past 64 bits as a float, silently rounded, and writes every float of 1e16 or
        # more with an exponent ("1.8446744073709552e+19"; tests/unit/test_protocol_plain.py holds orjson to
        # it): no "+" in the text, no such float, and the values are walked only when there is one.
        packed = orjson.dumps(doc)
        if (b"+" in packed and _maybe_rounded_int(doc)) or _maybe_tiny(packed):
            doc = exact_json(text)  # exact; the store keeps a big integer as its decimal text and says so, and
            # ingest.SpoolLines refuses a non-zero number that orjson rounded to 0.0 (unholdable_problem)
        else:  # orjson refused NaN and lone surrogates; a NUL is written "\\u0000" (no backslash, no NUL)
            plain = not (b"\\" in packed and b"\\u0000" in packed)
    if not isinstance(doc, dict):
        return error_event(pos, f"malformed agent line {pos} (not an object)", kind="protocol")
    # written exactly as orjson writes what was read (compact ASCII, the agent's spool.py): no key was dropped. The
    # same length is not enough: a repeat made up by numbers written shorter (1E5 for 100000.0) has it too
    same = len(packed) == len(text) and text.isascii() and packed == text.encode("ascii")
    twice = [] if same else _keys_written_twice(text, doc)
    if twice:  # the row names the line's type and case where the line writes those once (as for a seq mismatch)
        typ = doc.get("type")
        named: dict[str, Any] = {"line_type": typ} if isinstance(typ, str) and "type" not in twice else {}
        named.update((k, v) for k, v in case_fields(doc).items()
                     if not any(t == k or t.startswith((f"{k}.", f"{k}[")) for t in twice))  # fmt: skip
        return error_event(
            pos,
            f"agent line {pos} writes the key{'s' if len(twice) > 1 else ''} {', '.join(map(repr, twice))} twice "
            "in one object; which one is meant is unknown (JSON readers keep the last), so its content is not "
            "trusted",
            kind="protocol",
            **named,
        )
    return _event_of(doc, pos, expected_seq, shift, plain)


def _parse_compact(line: bytes, pos: int, expected_seq: int, shift: int) -> Event | None:
    """:func:`parse_line`'s result for a line that is an object written as orjson writes what it read (compact
    ASCII: the agent's ``spool.py``), with no ``+`` and no ``0.0`` in it (so no float orjson may have rounded,
    :func:`_maybe_tiny`, ``_maybe_rounded_int``); None for any other line, which parse_line then reads by its
    general path. The ingest hot path: the bytes are read as they are (orjson checks UTF-8), with no decoding,
    stripping and encoding of a text copy, and none of the general path's questions, each of which this line
    answers the same way: valid UTF-8, read by orjson, an object, no key written twice (written as orjson writes
    the object read), ``plain`` unless it writes ``\\u0000``."""
    raw = line.strip()  # ASCII whitespace, which str.strip() strips too; JSON's is a subset of it
    try:
        doc = orjson.loads(raw)
    except ValueError:
        return None
    if type(doc) is not dict:
        return None
    packed = orjson.dumps(doc)
    if packed != raw or b"+" in packed or b"0.0" in packed or not packed.isascii():
        return None
    return _event_of(doc, pos, expected_seq, shift, not (b"\\" in packed and b"\\u0000" in packed))


def _event_of(doc: dict[str, Any], pos: int, expected_seq: int, shift: int, plain: bool) -> Event:
    """parse_line's event of the JSON object ``doc`` (read from the line at ``pos``): its version, seq, type and
    ts checked and taken out of it."""
    v = doc.pop("v", None)
    if type(v) is not int or v != PROTOCOL_VERSION:  # true == 1 and 1.0 == 1 in Python: neither is version 1
        return error_event(pos, f"agent line {pos} speaks protocol v{v!r}, orch speaks v{PROTOCOL_VERSION}",
                           kind="protocol")  # fmt: skip
    seq, typ = doc.pop("seq", None), doc.pop("type", None)
    if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(typ, str):
        return error_event(pos, f"agent line {pos} lacks integer 'seq' or 'type'", kind="protocol")
    if seq != expected_seq:
        extra: dict[str, Any] = {"kind": "protocol", "line_type": typ, **case_fields(doc)}
        after_blank = f" (seq {expected_seq} expected after {shift} blank line(s))" if shift else ""
        return error_event(
            pos,
            f"agent line {pos} ({typ}) claims seq {seq}{after_blank}: a line's seq must be its position in the "
            "spool (a gap, a duplicate or a reordered line); its content is not trusted",
            **extra,
        )
    ts = doc.pop("ts", None)
    if ts is not None and (isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts)):
        return error_event(pos, f"agent line {pos} ({typ}): ts must be unix seconds (a finite number), got {ts!r:.80}",
                           kind="protocol", line_type=typ, **case_fields(doc))  # fmt: skip
    ts_f = float(ts) if ts is not None else None
    if ts_f is not None and not TS_MIN <= ts_f <= time.time() + TS_AHEAD_S:
        return error_event(pos, f"agent line {pos} ({typ}): {ts_problem(ts_f)}",
                           kind="protocol", line_type=typ, **case_fields(doc))  # fmt: skip
    return Event(pos, typ, ts_f, PROTOCOL_VERSION, doc, plain)


_KEY_END = re.compile(r'"[ \t\n\r]*:')  # a key's closing quote and its colon, JSON whitespace between (RFC 8259 §2)
_ESCAPED_KEY_END = re.compile(r'\\"[ \t\n\r]*:')  # the same inside a string (an escaped quote): no key


def _keys_written_twice(text: str, doc: dict[str, Any]) -> list[str]:
    """The keys that one object of the JSON text ``text`` (read as ``doc``) writes more than once, at any depth,
    each named by its path (``metrics``, ``metrics.t.value``, ``rows[1].b``; an object's own repeats before those
    of the objects inside it);
    JSON readers keep the last silently (RFC 8259 §4: names "SHOULD be unique", behaviour otherwise
    unpredictable), so a repeat anywhere in a line makes what it says ambiguous: a metric's ``value`` written
    twice is two figures, one of them dropped without a trace.

    On the ingest hot path, so screens first. ``parse_line`` calls this only when the line is not byte for byte
    orjson's compact writing of what was read (a line the agent wrote in ASCII is; a dropped repeat makes the
    re-written text differ). Then: every key is written as ``"name"`` then ``:`` (the agent writes compact JSON;
    ``": "`` matches too; whitespace between the quote and the colon, ``"v" :``, is counted by a regex, run only
    when a quote followed by whitespace is in the text), so a text with no more of those than ``doc`` holds keys
    (nested ones included) has no key twice. One scan of the line (~3 ms for a 2 MB line, ~0.1 us for 200 B;
    bench/ingest.py). When there are more, ``\\":`` (a quote escaped inside a string: a tool's JSON output in an
    excerpt) is discounted, and only a line that still has more is read again keeping every pair (numbers kept as
    their text: no digit limit, nothing rounded). Not detected: a key ending in a backslash next to a repeat; the
    agent writes none."""
    if '" ' in text or '"\t' in text or '"\n' in text or '"\r' in text:
        written, escaped = len(_KEY_END.findall(text)), len(_ESCAPED_KEY_END.findall(text))
    else:
        written, escaped = text.count('":'), text.count('\\":')
    keys = _count_keys(doc)
    if written <= keys or written - escaped <= keys:
        return []
    try:
        tree = json.loads(text, object_pairs_hook=_Pairs, parse_int=str, parse_float=str, parse_constant=str)
    except (ValueError, RecursionError):
        return []
    found: list[str] = []
    stack: list[tuple[Any, str]] = [(tree, "")]
    while stack:  # depth first, in the order the text writes them (children pushed in reverse)
        node, path = stack.pop()
        if isinstance(node, _Pairs):
            seen: set[str] = set()
            for k, _ in node:
                name = f"{path}.{k}" if path else k
                if k in seen and name not in found:
                    found.append(name)
                seen.add(k)
            stack.extend((v, f"{path}.{k}" if path else k) for k, v in reversed(node) if isinstance(v, list))
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in reversed(list(enumerate(node))) if isinstance(v, list))
    return found


class _Pairs(list[tuple[str, Any]]):
    """An object's pairs as written, repeats kept (``_keys_written_twice``); a list, so that arrays (plain lists)
    and objects are both walked."""


_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})


def _count_keys(value: Any) -> int:
    """How many keys the objects in ``value`` hold, nested ones included (a list of scalars is skipped in C)."""
    if isinstance(value, dict):
        return len(value) + sum(_count_keys(v) for v in value.values() if type(v) in (dict, list))
    if isinstance(value, list) and not set(map(type, value)) <= _SCALAR_TYPES:
        return sum(_count_keys(v) for v in value if type(v) in (dict, list))
    return 0


def case_fields(doc: dict[str, Any]) -> dict[str, Any]:
    """``case`` and ``case_index`` of a line, kept on its error so the row names its case — only when well-typed
    and storable (an object holding nothing :func:`unholdable_problem` refuses, an integer in 0..2**31 - 1, the
    store's 32-bit column): a wrong-typed one is never stored."""
    out: dict[str, Any] = {}
    if isinstance(doc.get("case"), dict) and unholdable_problem(doc["case"]) is None:
        out["case"] = doc["case"]
    ci = doc.get("case_index")
    if isinstance(ci, int) and not isinstance(ci, bool) and 0 <= ci < 2**31:
        out["case_index"] = ci
    return out


def oversize_event(position: int, size: int, head: bytes, cap: int) -> Event:
    """The error event for a spool line of ``size`` bytes, longer than ``cap``, at ``position``; ``head`` is its
    first bytes, searched for the seq it claims (the rest of the line was never held in memory)."""
    claimed = _SEQ_IN_HEAD.search(head)
    seq_text = f" (claiming seq {int(claimed.group(1))})" if claimed else ""
    return error_event(
        position,
        f"agent line {position}{seq_text} is {size:,} bytes, over orch's cap of {cap:,} bytes per line; "
        "it was not ingested (a tool's large output belongs in the host's run directory, not in an event)",
        kind="protocol",
        line_bytes=size,
    )


_SEQ_IN_HEAD = re.compile(rb'"seq"\s*:\s*(-?\d{1,18})')
