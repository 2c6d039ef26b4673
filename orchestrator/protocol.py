"""The versioned JSON-line event schema spoken by the agent (``agents/orch_agent``) — pure.

One JSON object per line::

    {"v": 1, "seq": int, "type": "hello|case_start|result|log|error|done", "ts": unix seconds, ...}

``seq`` is the 0-based line number in the host's spool file (``~/.orch/runs/<run_id>/<host>/events.jsonl``), so a
follower that has ingested up to ``seq`` resumes with ``--from seq+1``, and a corrupted line still has a seq.
orch counts positions itself and checks each line's ``seq`` against its position (:func:`parse_line`): a line
whose seq disagrees is stored as a protocol error at its position, never under the seq it claims.

Per type (fields beyond these are kept in ``Event.data`` untouched):

- ``hello``: ``agent_version`` (sha256 of agent.pyz), ``run_id``, ``suite``, ``facts`` (host facts),
  ``cases_total``.
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
from dataclasses import dataclass, field
from typing import Any

import orjson

PROTOCOL_VERSION = 1
EVENT_TYPES = frozenset({"hello", "case_start", "result", "log", "error", "done"})
METRIC_STAT_KEYS = ("median", "p10", "p90", "min", "max", "n")


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


@dataclass(frozen=True)
class Event:
    """A parsed agent line. ``data`` holds every field but ``v``, ``seq``, ``type``, ``ts``."""

    seq: int
    type: str
    ts: float | None = None
    v: int = PROTOCOL_VERSION
    data: dict[str, Any] = field(default_factory=dict)

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
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"metric {name!r}: {key} must be a finite number, got {x!r}")
    return float(x)


def parse_metric(name: str, m: Any) -> Metric:
    """Validate one metric object; raises ValueError naming the metric and the bad field."""
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


def error_event(seq: int, message: str, **extra: Any) -> Event:
    return Event(seq=seq, type="error", data={"message": message, **extra})


def parse_line(line: str | bytes, *, expected_seq: int) -> Event:
    """Parse one agent line, found at position ``expected_seq`` (0-based) of the spool, into an Event; never raises.

    The event's seq is always that position: orch never takes a seq from a line's content. A line that is not a
    JSON object, has the wrong protocol version, lacks ``seq``/``type``, or whose ``seq`` is not its position (a
    gap, a duplicate, a reordered or foreign line) becomes an ``error`` event (``kind: protocol``) at that
    position carrying the reason — the store keeps it as one error row. A mismatched line's ``case`` and
    ``case_index`` are kept on the error so the row names its case, and ``line_type`` says what it claimed to be.
    Unknown types are returned as they are; the caller logs and skips them.
    """
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
    text = text.strip()
    try:
        doc = orjson.loads(text)  # the ingest hot path: orjson parses a result line ~3x faster than json
    except ValueError:  # orjson.JSONDecodeError is a ValueError
        return error_event(
            expected_seq, f"malformed agent line {expected_seq} (not JSON): {text[:200]!r}", kind="protocol"
        )
    if not isinstance(doc, dict):
        return error_event(expected_seq, f"malformed agent line {expected_seq} (not an object)", kind="protocol")
    v = doc.pop("v", None)
    if v != PROTOCOL_VERSION:
        return error_event(
            expected_seq,
            f"agent line {expected_seq} speaks protocol v{v!r}, orch speaks v{PROTOCOL_VERSION}",
            kind="protocol",
        )
    seq, typ = doc.pop("seq", None), doc.pop("type", None)
    if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(typ, str):
        return error_event(expected_seq, f"agent line {expected_seq} lacks integer 'seq' or 'type'", kind="protocol")
    if seq != expected_seq:
        extra: dict[str, Any] = {"kind": "protocol", "line_type": typ}
        for key in ("case", "case_index"):
            if key in doc:
                extra[key] = doc[key]
        return error_event(
            expected_seq,
            f"agent line {expected_seq} ({typ}) claims seq {seq}: a line's seq must be its position in the spool "
            "(a gap, a duplicate or a reordered line); its content is not trusted",
            **extra,
        )
    ts = doc.pop("ts", None)
    ts_f = float(ts) if isinstance(ts, (int, float)) and not isinstance(ts, bool) else None
    return Event(seq=expected_seq, type=typ, ts=ts_f, v=PROTOCOL_VERSION, data=doc)


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
