"""``regex``: a pattern with named groups searched over the whole output (``re.MULTILINE``); each match is a
record of its groups, so a metric comes from the last match whose group matched — pure.

The output's lines are the ones every parser reads (:func:`textlines.output_lines`): a ``\\r\\n``, a lone ``\\r``
(a progress bar's) or an ASCII separator ends a line as ``\\n`` does, so ``^`` and ``$`` match there too (Python's
``re`` knows only ``\\n``: ``t=(?P<t>.+)$`` skipped a last ``t=2.0\\r\\n`` and took the line before it)."""

from __future__ import annotations

import re

from orchestrator.parsers.base import ParserDef, Record
from orchestrator.textlines import output_lines


def _records(text: str, pattern: str | None) -> list[Record]:
    if not pattern:
        raise ValueError("the regex parser needs a pattern")
    rx = re.compile(pattern, re.MULTILINE)
    text = "\n".join(output_lines(text))
    return [{k: v for k, v in m.groupdict().items() if v is not None} for m in rx.finditer(text)]


PARSER = ParserDef("regex", "match of the suite's pattern", _records, takes_pattern=True)
