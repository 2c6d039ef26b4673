"""What every output parser shares: records, field-path lookup, the parser definition — pure.

A parser turns a command's output text into *records*: JSON objects (one per JSON line, the one JSON document,
or the named groups of one regex match). A format whose output is one run (``ParserDef.single``: the JSONL files
that SGLang's and other tools append one line per run to) uses its **last** record for every metric, and says
in a note how many records there were: fields of an earlier run never mix into the later one. The ``regex``
parser reads each metric from the last match that has it (its groups are partial by design).

Paths are dotted: ``percentiles.99``, ``results.0.busbw`` (a list index is a number). Numbers may be JSON
numbers or numeric strings (regex groups, written in ASCII: ``[+-]digits[.digits][e[+-]digits]``); booleans are
not numbers.

One rule for every parser's metrics (:func:`extract`), whatever the format wrote, and the same rule the agent's
own result lines follow (``protocol.EXACT_INT_MAX``): an integer must lie in [-2**53, 2**53] (``INT_MIN``..
``INT_MAX``: the store keeps every metric number as a double, which holds those integers exactly and no larger
range — 2**63 - 1 would be stored as 9223372036854775808, its low digits invented); a float must be finite
(JSON ``NaN``, ``Infinity``, ``1e400``, and SGLang's ``request_rate: Infinity``, are not measurements). A metric
whose value breaks the rule is a ParseError naming the metric and the value, never a silent miss and never a
surprise in the store. A numeric string follows the same rule as the JSON number it
spells: ``"12"`` is the integer 12, ``"12345678901234567890"`` is refused like the JSON integer, not read as
the float 1.2345678901234567e+19 — a float would store a counter with its low digits invented, and the same
output must give the same figure whether a suite reads it with ``json`` or ``regex``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.protocol import EXACT_INT_MAX, Unholdable, checked_float, exact_int
from orchestrator.textlines import LINE_BREAK, output_lines

Record = Mapping[str, Any]


class ParseError(ValueError):
    """The output is not in the parser's format (the message says what was expected)."""


class InvalidMeasurement(ParseError):
    """The output is in the format, but the tool itself says the measurement is not valid (nccl-tests counted
    wrong elements): the case is an error of kind ``invalid`` and none of its figures is stored."""


#: Key under which JSON-line parsers note a record's 1-based line in the output; removed before records are used.
LINE_KEY = "_orch_line"


class UnfitNumber(ParseError):
    """A metric's value is a number that breaks the module's rule (an integer past 2**53, a float that is not
    finite); the message names the value as the output wrote it."""


INT_MIN, INT_MAX = -EXACT_INT_MAX, EXACT_INT_MAX  # the integers a metric may be (see the module docstring)
_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NONFINITE_TEXT = re.compile(r"[+-]?(?:nan|inf|infinity)", re.IGNORECASE)


def lookup(record: Record, path: str) -> float | None:
    """The number at dotted ``path`` in ``record`` (an ``int`` when the output wrote an integer), or None when
    absent, not a number, or a number the module's rule refuses (see :func:`number_at` to tell those apart)."""
    try:
        return number_at(record, path)
    except UnfitNumber:
        return None


def value_at(record: Record, path: str) -> Any:
    """The value at dotted ``path`` in ``record`` as the output wrote it (a number, a string, a list...), or None
    when the path is absent: what :func:`number_at` read, for a message naming a value that is not a number."""
    node: Any = record
    for part in path.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isascii() and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


_INT_PAST = ("an integer past 2**53, which the store's numbers (IEEE 754 doubles) cannot hold exactly (a figure "
             "that large is written as a float, 1.8e19, or in a larger unit)")


def holds_null(record: Record, path: str) -> bool:
    """Whether dotted ``path`` is in ``record`` and holds JSON ``null`` (which :func:`value_at` cannot tell from
    an absent path): the tool wrote the field with no value, which a message says, not "found no metric"."""
    parent, _, last = path.rpartition(".")
    node = value_at(record, parent) if parent else record
    return isinstance(node, Mapping) and last in node and node[last] is None


def number_at(record: Record, path: str) -> float | None:
    """The number at dotted ``path`` in ``record`` (an ``int`` when the output wrote an integer), None when the
    path is absent or holds no number (a word, a list, a boolean). Raises :class:`UnfitNumber` when it holds a
    number outside the module's rule: an integer past 2**53, NaN or an infinity (also as a numeric string), or a
    non-zero number a double holds only as 0 (``1e-400``, read by :func:`~orchestrator.protocol.checked_float`)."""
    node = value_at(record, path)
    if node is None or isinstance(node, bool):
        return None
    shown = repr(node)
    if isinstance(node, str):
        text = node.strip()
        shown = text
        if _INT_TEXT.fullmatch(text):  # past 310 digits past a double's range, and never int() of thousands
            node = int(text) if len(text) <= 310 else Unholdable(text)
        elif _FLOAT_TEXT.fullmatch(text) or _NONFINITE_TEXT.fullmatch(text):
            node = checked_float(text)
        else:
            return None
    if isinstance(node, int):  # kept whole (a count stays 12, not 12.0)
        if INT_MIN <= node <= INT_MAX:
            return node
        raise UnfitNumber(f"{shown}, {_INT_PAST}")
    if isinstance(node, Unholdable) and node.tiny:
        raise UnfitNumber(f"{node.text}, not zero but below the smallest double (4.9e-324): it would be stored as 0")
    if isinstance(node, Unholdable) and any(c.isdigit() for c in node.text):  # 1e400, 309+ digits: as written
        digits = f" ({node.digits:,} digits)" if "..." in node.text else ""
        if node.text.lstrip("+-").replace("...", "").isdigit():  # an integer literal: the integers' rule
            raise UnfitNumber(f"{node.text}{digits}, {_INT_PAST}")
        raise UnfitNumber(f"{node.text}{digits}, past the range of a double (±1.8e308): no measurement")
    if isinstance(node, float):
        if math.isfinite(node):
            return node
        raise UnfitNumber(f"{shown}, not a finite number (NaN, an infinity, or past float's range): no measurement")
    return None


class _KeyTwice(Exception):
    """A JSON object of the output writes a key twice (not a ValueError: never taken for "not JSON")."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    doc = dict(pairs)
    if len(doc) != len(pairs):
        seen: set[str] = set()
        raise _KeyTwice(next(k for k, _ in pairs if k in seen or seen.add(k)))  # type: ignore[func-returns-value]
    return doc


# Python's json as the parsers read a tool's output: integers exact, a number past a double's range named
# (Unholdable), a key written twice refused (JSON readers keep the last silently, RFC 8259 §4: two figures, one
# dropped), and control characters inside strings taken as they are (``strict=False``: C tools write a raw tab
# in a GPU's name; refusing the line made the line before it the result)
_DECODER = json.JSONDecoder(parse_int=exact_int, parse_float=checked_float, object_pairs_hook=_unique_pairs,
                            strict=False)  # fmt: skip
_BOM = "\ufeff"


def _decoded(text: str, where: str) -> Any:
    """``text`` as one JSON value (:data:`_DECODER`); raises ValueError when it is not JSON, ParseError naming
    ``where`` when it writes a key twice."""
    try:
        return _DECODER.decode(text)
    except _KeyTwice as dup:
        raise ParseError(f"{where} writes the key {dup.args[0]!r} twice in one object; which value the tool meant is "
                         "unknown (JSON readers keep the last), so it is not read") from None  # fmt: skip


def json_lines(text: str, numbered: bool = False) -> list[dict[str, Any]]:
    """Every line of ``text`` that is a JSON object (log lines in between are skipped); with ``numbered`` each
    carries its 1-based line number under :data:`LINE_KEY` (``ParserDef.parse`` removes it). Raises ParseError
    when a line that starts as an object (``{``) after the last one read is not JSON: the tool's last record is
    unreadable (cut short, not valid), and the one before it is not its result; and when an object writes a key
    twice. A byte order mark before a line is ignored."""
    out: list[dict[str, Any]] = []
    broken: tuple[int, str] | None = None
    for no, line in enumerate(output_lines(text), 1):
        line = line.strip().lstrip(_BOM)
        if not line.startswith("{"):
            continue
        try:
            doc = _decoded(line, f"output line {no}")  # an integer of 4,300+ digits is a number past range
        except (ValueError, RecursionError) as exc:
            if not isinstance(exc, ParseError):
                broken = (no, str(exc))
                continue
            raise
        if isinstance(doc, dict):
            out.append({**doc, LINE_KEY: no} if numbered else doc)
            broken = None
    _refuse_unreadable_last(broken, out, "starts as a JSON object but is not JSON", "line that is")
    return out


def json_documents(text: str, numbered: bool = False) -> list[dict[str, Any]]:
    """The JSON objects of ``text``: the whole text when it is one object; else each object that begins at the
    start of a line (a ``{`` in column 0, after a byte order mark) and may span lines (pretty-printed), read from
    there to its end, log lines between them skipped. An object inside another (an indented line of a
    pretty-printed document) is never one of them. ``numbered``: each carries the line it starts on under
    :data:`LINE_KEY`. Raises ParseError when a line that starts an object after the last object read is not JSON
    (a document cut short), and when an object writes a key twice."""
    try:
        whole = _decoded(text, "the output")
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, ParseError):
            raise
    else:
        return [{**whole, LINE_KEY: 1} if numbered else whole] if isinstance(whole, dict) else []
    out: list[dict[str, Any]] = []
    broken: tuple[int, str] | None = None
    starts = [0] + [m.end() for m in LINE_BREAK.finditer(text)]
    end = 0  # where the last object read ends: lines before it are inside it
    for no, at in enumerate(starts, 1):
        if at < end or at >= len(text):
            continue
        at += text.startswith(_BOM, at)
        if text[at : at + 1] != "{":
            continue
        try:
            doc, end = _DECODER.raw_decode(text, at)
        except _KeyTwice as dup:
            raise ParseError(f"the JSON object at output line {no} writes the key {dup.args[0]!r} twice; which value "
                             "the tool meant is unknown (JSON readers keep the last), so it is not read"
                             ) from None  # fmt: skip
        except (ValueError, RecursionError) as exc:
            broken = (no, str(exc))
            continue
        if isinstance(doc, dict):
            out.append({**doc, LINE_KEY: no} if numbered else doc)
            broken = None
    _refuse_unreadable_last(broken, out, "starts a JSON object that is not JSON", "object read")
    return out


def _refuse_unreadable_last(broken: tuple[int, str] | None, read: list[dict[str, Any]], what: str, last: str) -> None:
    """Raise ParseError when an object that could not be read (``broken``: its line and why) comes after the last
    one read: the tool's last record is unreadable, and the one before it is not its result."""
    if broken is not None and read:
        raise ParseError(f"output line {broken[0]} {what} ({broken[1][:120]}), after the last {last}: the tool's "
                         "last record cannot be read, and an earlier one is not its result")  # fmt: skip


def json_document(text: str) -> dict[str, Any] | None:
    """The whole text as one JSON object, else the last object :func:`json_documents` finds; None when there is
    none. Raises ParseError as :func:`json_documents` does."""
    docs = json_documents(text)
    return docs[-1] if docs else None


@dataclass(frozen=True)
class RequestCounts:
    """What a serving benchmark says about its requests: ``completed``, ``failed`` (None when the tool does not
    say) and ``total`` sent (None when it does not say); counts of requests."""

    completed: int
    failed: int | None
    total: int | None


def _count(record: Record, key: str) -> int | None:
    """The request count at ``key``: None when absent or not a number; raises ParseError when it is a number
    that cannot be a count (negative, fractional, not finite) — a tool that says ``failed: -3`` is broken, and
    its figures are not believed."""
    v = record.get(key)
    if v is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if not math.isfinite(v) or v < 0 or v != int(v):
        raise ParseError(f"{key!r} is {v!r}, not a request count (a whole number >= 0)")
    return int(v)


def request_counts(record: Record) -> RequestCounts | None:
    """The request counts of a serving benchmark's result record, None when it has no ``completed``.

    Sources, first found wins: failed = ``failed`` (vLLM ``bench serve``), ``failures``, the non-empty entries of
    ``errors`` (SGLang ``bench_serving --output-details``, vLLM ``--save-detailed``), ``len(input_lens) −
    completed`` (SGLang: one input length per request sent); total = ``num_prompts`` (vLLM), ``len(errors)``,
    ``len(input_lens)``, else completed + failed.

    Raises ParseError when a count is negative or fractional, or when the failed requests exceed those sent."""
    completed = _count(record, "completed")
    if completed is None:
        return None
    failed = _count(record, "failed")
    if failed is None:
        failed = _count(record, "failures")
    errors, lens = record.get("errors"), record.get("input_lens")
    total = _count(record, "num_prompts")
    if isinstance(errors, list):
        failed = failed if failed is not None else sum(1 for e in errors if e)
        total = total if total is not None else len(errors)
    if isinstance(lens, list):
        total = total if total is not None else len(lens)
        failed = failed if failed is not None else max(0, len(lens) - completed)
    if total is None and failed is not None:
        total = completed + failed
    if total is not None and completed + (failed or 0) > total:
        raise ParseError(
            f"{completed} completed and {failed or 0} failed requests are more than the {total} sent"
        )
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
    ``single``: the output is one run of the tool, so its last record holds every metric; earlier records are
    other runs appended to the same file (``bench_serving --output-file`` appends) and are never mixed in.
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
    single: bool = False

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
        """The output's records of this format (of ``case`` when the format selects; the last one for a
        ``single`` format). Raises ParseError when there is none."""
        return self.parse_noted(text, pattern, case)[0]

    def parse_noted(
        self, text: str, pattern: str | None = None, case: Mapping[str, Any] | None = None
    ) -> tuple[list[Record], list[str]]:
        """:meth:`parse` plus notes for the result's warnings (a ``single`` format's output that held several
        records: how many, on which lines, and which one was used). Raises ParseError when there is no record."""
        records = self.records(text, pattern)
        if self.signature:
            records = [r for r in records if all(k in r for k in self.signature)]
        if not records:
            raise ParseError(f"no {self.description} in the output")
        if self.select is not None:
            records = self.select(records, case or {})
        notes: list[str] = []
        if self.single and len(records) > 1:
            lines = [r.get(LINE_KEY) for r in records]
            where = f" (lines {', '.join(str(n) for n in lines)})" if all(lines) else ""
            used = f"line {lines[-1]}" if lines[-1] else "the last"
            notes.append(
                f"the output holds {len(records)} {self.name} result records{where}: used the last one ({used}) "
                "for every metric; the others are earlier runs appended to the same file"
            )
            records = records[-1:]
        return [{k: v for k, v in r.items() if k != LINE_KEY} for r in records], notes


def extract(records: Sequence[Record], paths: Mapping[str, str]) -> tuple[dict[str, float], list[str]]:
    """Metric name -> value from the last record holding each path; and the names found nowhere. Raises
    :class:`UnfitNumber` naming the metric, its path and the value when the last record holding a number there
    holds one the module's rule refuses (an earlier record's value is never taken in its place)."""
    found: dict[str, float] = {}
    missing: list[str] = []
    for name, path in paths.items():
        for rec in reversed(records):
            try:
                v = number_at(rec, path)
            except UnfitNumber as exc:
                where = f"metric {name!r}" + (f" (path {path})" if path != name else "")
                raise UnfitNumber(f"{where} in the output is {exc}") from None
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
