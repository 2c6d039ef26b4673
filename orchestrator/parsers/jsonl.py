"""``jsonl``: one JSON object per line (other lines skipped); every metric comes from the **last** JSON line, so
fields of earlier lines (earlier runs appended to the same file) never mix into it; several lines add a note to
the result's warnings. Metrics printed on different lines need the ``regex`` parser — pure."""

from __future__ import annotations

from orchestrator.parsers.base import ParserDef, Record, json_lines


def _records(text: str, pattern: str | None) -> list[Record]:
    return list(json_lines(text, numbered=True))


PARSER = ParserDef("jsonl", "JSON line", _records, single=True)
