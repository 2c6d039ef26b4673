"""What every output parser shares: records, field-path lookup, the parser definition — pure.

A parser turns a command's output text into *records*: JSON objects (one per JSON line, the one JSON document,
or the named groups of one regex match). A metric is read from the last record that has its field path, so a
tool that appends one line per run reports its latest run. Paths are dotted: ``percentiles.99``,
``results.0.busbw`` (a list index is a number). Numbers may be JSON numbers or numeric strings (regex groups);
booleans and non-finite values (SGLang writes ``request_rate: Infinity``) are not metrics.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Record = Mapping[str, Any]


class ParseError(ValueError):
    """The output is not in the parser's format (the message says what was expected)."""


def lookup(record: Record, path: str) -> float | None:
    """The finite number at dotted ``path`` in ``record``, or None when absent or not a finite number."""
    node: Any = record
    for part in path.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    if isinstance(node, bool):
        return None
    if isinstance(node, str):
        try:
            node = float(node.strip())
        except ValueError:
            return None
    if isinstance(node, (int, float)) and math.isfinite(node):
        return float(node)
    return None


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` that is a JSON object (log lines in between are skipped)."""
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


def json_document(text: str) -> dict[str, Any] | None:
    """The whole text as one JSON object, else the last line that is one; None when there is neither."""
    try:
        doc = json.loads(text)
    except ValueError:
        lines = json_lines(text)
        return lines[-1] if lines else None
    return doc if isinstance(doc, dict) else None


@dataclass(frozen=True)
class RequestCounts:
    """What a serving benchmark says about its requests: ``completed``, ``failed`` (None when the tool does not
    say) and ``total`` sent (None when it does not say); counts of requests."""

    completed: int
    failed: int | None
    total: int | None


def _count(v: Any) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


def request_counts(record: Record) -> RequestCounts | None:
    """The request counts of a serving benchmark's result record, None when it has no ``completed``.

    Sources, first found wins: failed = ``failed`` (vLLM ``bench serve``), ``failures``, the non-empty entries of
    ``errors`` (SGLang ``bench_serving --output-details``, vLLM ``--save-detailed``), ``len(input_lens) −
    completed`` (SGLang: one input length per request sent); total = ``num_prompts`` (vLLM), ``len(errors)``,
    ``len(input_lens)``, else completed + failed."""
    completed = _count(record.get("completed"))
    if completed is None:
        return None
    failed = _count(record.get("failed"))
    if failed is None:
        failed = _count(record.get("failures"))
    errors, lens = record.get("errors"), record.get("input_lens")
    total = _count(record.get("num_prompts"))
    if isinstance(errors, list):
        failed = failed if failed is not None else sum(1 for e in errors if e)
        total = total if total is not None else len(errors)
    if isinstance(lens, list):
        total = total if total is not None else len(lens)
        failed = failed if failed is not None else max(0, len(lens) - completed)
    if total is None and failed is not None:
        total = completed + failed
    return RequestCounts(completed, failed, total)


@dataclass(frozen=True)
class ParserDef:
    """One output format.

    ``records(text, pattern)`` splits an output into records (``pattern``: the regex parser's, else None).
    ``units``: the unit of each documented field; ``unit_rules``: (regex over the path, unit) for field families
    (``*_ms``). ``headline``: the metrics recorded when a suite names none. ``signature``: fields every record of
    this format has; records without them are ignored, and an output with none is a ParseError. ``select(records,
    case)``: the records of one case (its parameters), for formats whose output holds several (nccl-tests: the
    row of the case's ``size_bytes``); raises ParseError naming what was found when that is not exactly one.
    ``requests(record)``: the request counts, for tools that report them (serving benchmarks); None otherwise.
    """

    name: str
    description: str
    records: Callable[[str, str | None], list[Record]]
    units: Mapping[str, str] = field(default_factory=dict)
    unit_rules: Sequence[tuple[str, str]] = ()
    headline: tuple[str, ...] = ()
    signature: tuple[str, ...] = ()
    takes_pattern: bool = False
    select: Callable[[Sequence[Record], Mapping[str, Any]], list[Record]] | None = None
    requests: Callable[[Record], RequestCounts | None] | None = None

    @property
    def generic(self) -> bool:
        """True for json/jsonl/regex: the suite must name its metrics and their units."""
        return not self.units and not self.unit_rules

    def unit_of(self, path: str) -> str | None:
        if path in self.units:
            return self.units[path]
        for rule, unit in self.unit_rules:
            if re.search(rule, path):
                return unit
        return None

    def parse(self, text: str, pattern: str | None = None, case: Mapping[str, Any] | None = None) -> list[Record]:
        """The output's records of this format (of ``case`` when the format selects). Raises ParseError when there
        is none."""
        records = self.records(text, pattern)
        if self.signature:
            records = [r for r in records if all(k in r for k in self.signature)]
        if not records:
            raise ParseError(f"no {self.description} in the output")
        if self.select is not None:
            records = self.select(records, case or {})
        return records


def extract(records: Sequence[Record], paths: Mapping[str, str]) -> tuple[dict[str, float], list[str]]:
    """Metric name -> value from the last record holding each path; and the names found nowhere."""
    found: dict[str, float] = {}
    missing: list[str] = []
    for name, path in paths.items():
        for rec in reversed(records):
            v = lookup(rec, path)
            if v is not None:
                found[name] = v
                break
        else:
            missing.append(name)
    return found, missing


#: The latency figures engineers read first from a serving benchmark (SGLang bench_serving, vLLM bench serve),
#: in this order: mean/median/p99 of TTFT, TPOT and ITL, all in ms.
SERVING_LATENCY_HEADLINE = tuple(
    f"{stat}_{m}_ms" for m in ("ttft", "tpot", "itl") for stat in ("mean", "median", "p99")
)
