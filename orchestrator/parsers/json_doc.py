"""``json``: the output is one JSON object, or the last of the objects that begin at a line's start (log lines
around them skipped; several add a note to the result's warnings, as ``jsonl``'s lines do); metrics are dotted
field paths — pure."""

from __future__ import annotations

from orchestrator.parsers.base import ParserDef, Record, json_documents


def _records(text: str, pattern: str | None) -> list[Record]:
    return list(json_documents(text, numbered=True))


PARSER = ParserDef("json", "JSON object", _records, single=True)
