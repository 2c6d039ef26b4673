"""The shape of each agent event, checked field by field before anything is stored — pure.

A spool line that is valid JSON at its position can still say something orch would have to change to store: a
metric statistic that is a string (``"median": "fast"``), ``metrics`` that is a list, a ``case_index`` that is
not a non-negative integer, ``done`` counts that are not counts. Storing such a
line means dropping or coercing part of it, so :func:`field_problem` names the first wrong field and the caller
(``ingest.SpoolLines``) stores the whole line as one ``error`` row at its position instead.

The fields and their types are the protocol's (``protocol`` module docstring; the agent writes them in
``agents/orch_agent/worker.py``). Fields a type does not list are free-form and kept as they are (``info``
must still be an object, ``case`` parameters are any JSON values under string keys).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orchestrator.store.compute import CleanMetrics, clean_metrics

DONE_STATUSES = frozenset({"completed", "failed", "cancelled"})
DONE_COUNT_KEYS = ("lines", "results", "errors")


def _is_count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= 0


CASE_INDEX_MAX = 2**31 - 1  # results.case_index is an INTEGER column: PostgreSQL's is 32-bit (SQLite's 64)


def _is_case_index(x: Any) -> bool:
    return _is_count(x) and x <= CASE_INDEX_MAX


def _opt(data: Mapping[str, Any], key: str, ok: bool, want: str) -> str | None:
    return None if key not in data or data[key] is None or ok else f"{key} must be {want}, got {_show(data[key])}"


def _show(x: Any) -> str:
    text = repr(x)
    return text if len(text) <= 80 else text[:77] + "..."


def field_problem(typ: str, data: Mapping[str, Any]) -> str | None:
    """The first field of an event of type ``typ`` (``data``: its fields but v/seq/type/ts) whose type is wrong,
    as a sentence naming the field and what it held; None when every field the protocol defines is well-typed."""
    return checked_fields(typ, data)[0]


def checked_fields(typ: str, data: Mapping[str, Any]) -> tuple[str | None, CleanMetrics | None]:
    """:func:`field_problem`'s sentence, and a well-typed ``result``'s metrics as ``compute.clean_metrics`` returns
    them (None for other types and on a problem): ingest hands them on in ``Event.clean_metrics``, so the store
    does not check the metrics a second time (3.4 us of the ~37 us a 200 B line costs, bench/ingest.py)."""
    problem = _first_problem(typ, data)
    if problem is not None or typ != "result":
        return problem, None
    try:
        cleaned = clean_metrics(data.get("metrics"))
    except ValueError as exc:
        return f"metrics: {exc}", None
    problem = _opt(data, "info", isinstance(data.get("info"), dict), "an object")
    return problem, (cleaned if problem is None else None)


def _first_problem(typ: str, data: Mapping[str, Any]) -> str | None:
    """field_problem without a result's metrics values and ``info`` (checked_fields checks them)."""
    case_index = data.get("case_index")
    if typ in ("case_start", "result"):
        if not _is_count(case_index):
            return f"case_index must be a non-negative integer, got {_show(case_index)}"
        if not _is_case_index(case_index):
            return f"case_index must be at most {CASE_INDEX_MAX} (the store's column is 32-bit), got {case_index}"
        if not isinstance(data.get("case"), dict):
            return f"case must be an object of parameters, got {_show(data.get('case'))}"
    if typ == "result":
        if not isinstance(data.get("metrics"), dict):
            return f"metrics must be an object of name -> {{value, unit, ...}}, got {_show(data.get('metrics'))}"
        return None
    if typ == "error":
        return (
            _opt(data, "case_index", _is_case_index(case_index), f"a non-negative integer up to {CASE_INDEX_MAX}")
            or _opt(data, "case", isinstance(data.get("case"), dict), "an object of parameters")
            or (
                None
                if isinstance(data.get("message"), str)
                else f"message must be a string, got {_show(data.get('message'))}"
            )
        )
    if typ == "log":
        return _opt(data, "level", isinstance(data.get("level"), str), "a string") or _opt(
            data, "message", isinstance(data.get("message"), str), "a string"
        )
    if typ == "hello":
        return (
            _opt(data, "run_id", isinstance(data.get("run_id"), str), "a string")
            or _opt(data, "host", isinstance(data.get("host"), str), "a string")
            or _opt(data, "suite", isinstance(data.get("suite"), str), "a string")
            or _opt(data, "agent_version", isinstance(data.get("agent_version"), str), "a string")
            or _opt(data, "facts", isinstance(data.get("facts"), dict), "an object")
            or _opt(data, "cases_total", _is_count(data.get("cases_total")), "a non-negative integer")
        )
    if typ == "done":
        status = data.get("status", "completed")
        if status not in DONE_STATUSES:
            return f"status must be one of {', '.join(sorted(DONE_STATUSES))}, got {_show(status)}"
        counts = data.get("counts")
        if counts is None:
            return None
        if not isinstance(counts, dict):
            return f"counts must be an object of {', '.join(DONE_COUNT_KEYS)}, got {_show(counts)}"
        for key in DONE_COUNT_KEYS:
            if key in counts and not _is_count(counts[key]):
                return f"counts.{key} must be a non-negative integer, got {_show(counts[key])}"
        return _opt(data, "reason", isinstance(data.get("reason"), str), "a string")
    return None
