"""``regex``: a pattern with named groups searched over the whole output (``re.MULTILINE``); each match is a
record of its groups, so a metric comes from the last match whose group matched — pure."""

from __future__ import annotations

import re

from orchestrator.parsers.base import ParserDef, Record


def _records(text: str, pattern: str | None) -> list[Record]:
    if not pattern:
        raise ValueError("the regex parser needs a pattern")
    rx = re.compile(pattern, re.MULTILINE)
    return [{k: v for k, v in m.groupdict().items() if v is not None} for m in rx.finditer(text)]


PARSER = ParserDef("regex", "match of the suite's pattern", _records, takes_pattern=True)
