"""Pure helpers of the store: run ids, case keys, typed sweep axes, pairing and geometric mean for compare."""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

import orjson

from orchestrator.protocol import EXACT_INT_MAX, Event, inexact_int_problem

# Case parameters that do not change what is measured, only how often or with which random draw; two cases
# that differ only in these are the same case for /compare.
VOLATILE_CASE_KEYS = frozenset(
    {"seed", "repeat", "repeats", "warmup", "warmups", "iters", "iterations", "case_index", "run_id", "ts"}
)
_INT64_MAX = 2**63 - 1
_INT32_MAX = 2**31 - 1
# json.dumps(sort_keys=True, separators=(",", ":"), default=str) without building an encoder per call
_CASE_KEY_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str)
# Value types whose orjson encoding is byte for byte the stdlib's above, once the output is checked to be ASCII
# without DEL: the stdlib escapes non-ASCII (ensure_ascii) and DEL as \u00XX, orjson writes them raw; floats are
# left out (orjson writes 1.5e-7 where the stdlib writes 1.5e-07), as are nested values and non-str keys.
_ORJSON_SAME_TYPES = frozenset({str, int, bool, type(None)})


def uuid7() -> str:
    """A UUIDv7 (RFC 9562) string: 48-bit Unix milliseconds, then random bits — sorts by creation time."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    rand_a = (rand >> 62) & 0xFFF
    rand_b = rand & ((1 << 62) - 1)
    value = (ms << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b
    return str(uuid.UUID(int=value))


SHORT_ID_LEN = 8
# the forms of a run reference, in the words every "invalid run id" message and every help text uses (CLI and
# API alike); here, not in repo.py, so that the CLI's help needs no SQLAlchemy
RUN_REF_FORMS = (
    "its short id as `orch runs list` prints it (8 hex digits, e.g. f5563d1d) or the start of it (4+ digits), "
    "the full id or a unique prefix of it, latest, or latest~N"
)


def short_run_id(run_id: str) -> str:
    """The short form of a run id that the CLI and the dashboard print: its last 8 hex digits.

    A UUIDv7's leading digits are its creation time (the first 8 hex digits change only every ~65 s), so a prefix
    is ambiguous for runs started together; the tail is random (62 bits of ``rand_b``), so 8 digits (32 bits)
    collide with probability ~n²/2³³ among n runs (about 1e-4 at 1,000 runs). ``Store.resolve_run_id`` takes it.
    """
    longer = _LONGER_SHORT_IDS.get(run_id)
    return longer if longer is not None else run_id.replace("-", "")[-SHORT_ID_LEN:]


_LONGER_SHORT_IDS: dict[str, str] = {}


def use_longer_short_ids(longer: Mapping[str, str]) -> None:
    """Make :func:`short_run_id` print ``longer[run_id]`` for each run id given: the ids of a store whose last 8
    digits are shared by another run (``distinct_short_ids`` of them; ``Store.longer_short_ids``), set by the CLI
    when it opens the store. Replaces what was set before."""
    _LONGER_SHORT_IDS.clear()
    _LONGER_SHORT_IDS.update(longer)


def distinct_short_ids(run_ids: Iterable[str]) -> dict[str, str]:
    """Per run id, its shortest tail of at least ``SHORT_ID_LEN`` hex digits (dashes left out) that no other id
    of ``run_ids`` ends with — as git lengthens an abbreviated hash until it is unique. Pure.

    E.g. ``…-aaaa1234abcd`` and ``…-bbbb1234abcd`` (one tail ``1234abcd``): ``a1234abcd`` and ``b1234abcd``."""
    digits = {rid: rid.replace("-", "") for rid in run_ids}
    out: dict[str, str] = {}
    for rid, d in digits.items():
        n = SHORT_ID_LEN
        while n < len(d) and any(o != rid and e.endswith(d[-n:]) for o, e in digits.items()):
            n += 1
        out[rid] = d[-n:]
    return out


def case_key(case: Mapping[str, Any]) -> str:
    """Stable 32-hex-char key of a case: sha256 of its sorted parameters minus ``VOLATILE_CASE_KEYS``."""
    # no copy where nothing is left out (one key per result row ingested)
    stable = case if type(case) is dict and VOLATILE_CASE_KEYS.isdisjoint(case) else \
        {k: v for k, v in case.items() if k not in VOLATILE_CASE_KEYS}  # fmt: skip
    # The ingest hot path (one key per result row): orjson where it writes the very bytes of the stdlib encoder
    # (2 µs of 4.4 µs per row for a 200 B line); stored keys never change (tests/unit/test_store_compute.py).
    if set(map(type, stable.values())) <= _ORJSON_SAME_TYPES:
        try:
            raw = orjson.dumps(stable, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # an int past 64 bits, a key that is not a str
            raw = b"\x80"
        if raw.isascii() and b"\x7f" not in raw:
            return hashlib.sha256(raw).hexdigest()[:32]
    text = _CASE_KEY_ENCODER.encode(stable)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def typed_axis(value: Any, *, bits: int = 64) -> int | None:
    """An integer sweep-axis value for an indexed column, or None when the parameter is not an integer."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        return None
    limit = _INT64_MAX if bits == 64 else _INT32_MAX
    return value if -limit <= value <= limit else None


def from_unix(ts: float | None) -> datetime | None:
    if ts is None or not math.isfinite(ts):
        return None
    try:
        return datetime.fromtimestamp(ts, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def geomean(ratios: Iterable[float]) -> float | None:
    """Geometric mean of positive ratios; None when there are none."""
    logs = [math.log(r) for r in ratios if r > 0 and math.isfinite(r)]
    return math.exp(sum(logs) / len(logs)) if logs else None


def median(values: list[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


LOG_MAX_CHARS = 64_000  # a host run's log and error texts keep their last this many characters (append_bounded)


def append_bounded(text: str | None, line: str, limit: int) -> str:
    """Append a line to a log text, keeping its last ``limit`` characters (so the text is always the last
    ``limit`` characters of all its lines joined by newlines, however often it was cut)."""
    out = f"{text}\n{line}" if text else line
    return out[-limit:] if len(out) > limit else out


def log_entries(ev: Event, stand_ins: list[str]) -> list[str]:
    """What one line adds to its host run's log text (``Store._apply``), in order: orch's note of the stand-ins
    it stored for a line that is not a row (a row keeps them in ``info.stored_as``), then a ``log`` line's
    ``[level] message``. ``ev``: the line's event as ``storable.storable_event`` made it, with its ``stand_ins``."""
    out = []
    if stand_ins and ev.type not in ("result", "error"):
        out.append("[warn] orch stored " + "; ".join(stand_ins))
    if ev.type == "log":
        out.append(f"[{ev.data.get('level', 'info')}] {ev.data.get('message', '')}")
    return out


_STAT_KEYS = ("median", "p10", "p90", "min", "max")
_NUMBER_TYPES = frozenset({float, int})
_CLEAN_SHAPES = frozenset(
    ("value", "unit", *(k for i, k in enumerate((*_STAT_KEYS, "n")) if bits >> i & 1)) for bits in range(64)
)
"""The keys of each metric object that :func:`clean_metrics` writes, in its order (value, unit, the statistics
present, n): one such object, holding floats where floats are kept, is its own clean form."""
CleanMetrics = tuple[dict[str, dict[str, Any]], dict[str, list[float | int]] | None]  # (metrics, samples)


def clean_metrics(raw: Any) -> CleanMetrics:
    """A result event's metrics, validated by the rules of ``protocol.parse_metric``, as plain dicts:
    ``(metrics, samples)`` where ``metrics`` holds value, unit and the statistics of each metric and
    ``samples`` the raw samples by metric name (None when no metric has any) — the store keeps them apart so
    that reads of the statistics never parse the samples.

    The ingest hot path: the same checks (``value`` finite, ``unit`` a string, stats finite, ``n`` a
    non-negative int, ``samples`` a list of finite numbers) without building ``Metric`` objects, about 3x
    faster. Unknown keys are dropped, ``None`` stats omitted. Raises ValueError naming the metric and field; an
    integer past ``protocol.EXACT_INT_MAX`` is refused (a double would store it with invented low digits).
    """
    if not isinstance(raw, dict):
        raise ValueError("result event has no 'metrics' object")
    out: dict[str, dict[str, Any]] = {}
    samples_out: dict[str, list[float | int]] | None = None
    isfinite, numbers, exact = math.isfinite, _NUMBER_TYPES, EXACT_INT_MAX
    as_is = True  # every metric object is already its clean form, under a str name: ``raw`` itself is returned
    for name, m in raw.items():
        # Inlined checks (no helper calls): this runs for every metric of every result ingested.
        value: Any = m.get("value") if isinstance(m, dict) else None
        # the int range first: isfinite() of an int past a double's range raises OverflowError
        if type(value) is int and not -exact <= value <= exact:
            raise ValueError(inexact_int_problem(str(name), "value", value))
        if type(value) not in numbers or not isfinite(value) or not isinstance(m.get("unit"), str):
            raise ValueError(f"metric {name!r} needs a finite number 'value' and a string 'unit'")
        # ``m`` is its own clean form when it is a dict holding floats where floats are kept, nothing dropped
        # (no None, no samples, no other key) and its keys in the clean order: one dict less per metric
        clean = type(m) is dict and type(value) is float and tuple(m) in _CLEAN_SHAPES
        for k in _STAT_KEYS:
            v = m.get(k)
            if v is not None:
                if type(v) is int and not -exact <= v <= exact:
                    raise ValueError(inexact_int_problem(str(name), k, v))
                if type(v) not in numbers or not isfinite(v):
                    raise ValueError(f"metric {name!r}: {k} must be a finite number, got {v!r:.80}")
                if type(v) is not float:
                    clean = False
            elif k in m:
                clean = False
        n = m.get("n")
        if n is not None:
            if type(n) is not int or n < 0:
                raise ValueError(f"metric {name!r}: n must be a non-negative integer")
        elif "n" in m:
            clean = False
        samples = m.get("samples")
        if samples is not None:
            # set(map(type, ...)) runs in C: exact float/int (bool is an int subclass and is refused). sum() of
            # finite floats is finite unless it overflows; both cases reject only absurd input.
            if not isinstance(samples, list) or not (kinds := set(map(type, samples))) <= numbers:
                raise ValueError(f"metric {name!r}: samples must be a list of finite numbers")
            if int in kinds:  # kept as the agent wrote them: an integer sample is a double too (EXACT_INT_MAX)
                for x in samples:  # before the sum: isfinite() of an int past a double's range raises
                    if type(x) is int and not -exact <= x <= exact:
                        raise ValueError(inexact_int_problem(str(name), "samples[]", x))
            if not isfinite(sum(samples)):
                raise ValueError(f"metric {name!r}: samples must be a list of finite numbers")
            if samples_out is None:
                samples_out = {}
            samples_out[str(name)] = samples
        if clean and type(name) is str:
            out[name] = m
            continue
        as_is = False
        d: dict[str, Any] = {"value": float(value), "unit": m["unit"]}
        for k in _STAT_KEYS:
            v = m.get(k)
            if v is not None:
                d[k] = float(v)
        if n is not None:
            d["n"] = n
        out[str(name)] = d
    if as_is and type(raw) is dict:
        return raw, samples_out
    return out, samples_out
