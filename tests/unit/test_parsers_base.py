"""The shared parser helpers (``orchestrator/parsers/base.py``) at the edges its mutation run found unguarded
(docs/testing.md): the last JSON line of a document, bad lines skipped, list indices, request totals and failures
from SGLang's lists, and a format that selects a case's record."""

from __future__ import annotations

from typing import Any

from orchestrator.parsers.base import ParserDef, RequestCounts, json_document, json_lines, lookup, request_counts


def test_json_document_whole_or_last_object_line() -> None:
    assert json_document('{"a": 1}') == {"a": 1}
    assert json_document('log\n{"a": 1}\n{"a": 2}\n{"a": 3}\ndone') == {"a": 3}
    assert json_document("log only") is None
    assert json_document("[1, 2]") is None  # JSON, but not an object


def test_json_lines_skip_what_is_not_an_object_and_go_on() -> None:
    text = '{"a": 1}\n{not json\n[1]\n  {"a": 2}  \nlog\n{"a": 3}\n'
    assert json_lines(text) == [{"a": 1}, {"a": 2}, {"a": 3}]


def test_lookup_list_index_in_range_only() -> None:
    rec: dict[str, Any] = {"a": [1.5, 2.5]}
    assert (lookup(rec, "a.1"), lookup(rec, "a.2"), lookup(rec, "a.x")) == (2.5, None, None)
    assert lookup({"a": {"1": 4}}, "a.1") == 4.0


def test_request_counts_totals_from_lists() -> None:
    # SGLang --output-details: one errors entry per request sent
    assert request_counts({"completed": 3, "errors": ["", "boom", "", "", ""]}) == RequestCounts(3, 1, 5)
    # SGLang: one input length per request sent
    assert request_counts({"completed": 3, "failed": 0, "input_lens": [1, 2, 3, 4, 5]}) == RequestCounts(3, 0, 5)
    assert request_counts({"completed": 3, "input_lens": [1, 2, 3]}) == RequestCounts(3, 0, 3)


def test_a_selecting_format_gets_the_case_or_an_empty_one() -> None:
    def select(records: Any, case: Any) -> Any:
        return [r for r in records if r["k"] == case.get("k", 2)]

    p = ParserDef("t", "test record", lambda text, pattern: [{"k": 1}, {"k": 2}], select=select)
    assert p.parse("x", case={"k": 1}) == [{"k": 1}]
    assert p.parse("x") == [{"k": 2}]
