"""``jsonl``: one JSON object per line (other lines skipped); a metric comes from the last line that has it."""

from __future__ import annotations

from orchestrator.parsers.base import ParserDef, Record, json_lines


def _records(text: str, pattern: str | None) -> list[Record]:
    return list(json_lines(text))


PARSER = ParserDef("jsonl", "JSON line", _records)
