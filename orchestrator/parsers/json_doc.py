"""``json``: the output is one JSON object (or its last line is); metrics are dotted field paths — pure."""

from __future__ import annotations

from orchestrator.parsers.base import ParserDef, Record, json_document


def _records(text: str, pattern: str | None) -> list[Record]:
    doc = json_document(text)
    return [doc] if doc is not None else []


PARSER = ParserDef("json", "JSON object", _records)
