"""parsers/base.py at its edges (pure): what is a request count and what is refused, with the exact messages; the
sent total at its boundary; a ``single`` format's note when the records' lines are known, partly known or unknown.

Each test here fails against a mutant of ``orchestrator/parsers/base.py`` that the other parser tests let through
(issue 19; docs/testing.md, "orchestrator/parsers/base.py (session 5)")."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.parsers.base import LINE_KEY, ParseError, ParserDef, RequestCounts, request_counts

APPENDED = "for every metric; the others are earlier runs appended to the same file"


@pytest.mark.parametrize("failed", [True, False, "3", None, [1], {"n": 1}])
def test_a_failed_count_that_is_not_a_number_is_no_count(failed: Any) -> None:
    # a bool is an int in Python, never a count; text or a list is no number: failed and total unknown
    assert request_counts({"completed": 5, "failed": failed}) == RequestCounts(5, None, None)


@pytest.mark.parametrize(
    ("record", "says"),
    [
        ({"completed": 5, "failed": -3}, "'failed' is -3, not a request count (a whole number >= 0)"),
        ({"completed": 5, "failed": 2.5}, "'failed' is 2.5, not a request count (a whole number >= 0)"),
        ({"completed": 5, "failures": -1.0}, "'failures' is -1.0, not a request count (a whole number >= 0)"),
        ({"completed": float("inf")}, "'completed' is inf, not a request count (a whole number >= 0)"),
        ({"completed": float("-inf")}, "'completed' is -inf, not a request count (a whole number >= 0)"),
        ({"completed": float("nan")}, "'completed' is nan, not a request count (a whole number >= 0)"),
        ({"completed": 5, "num_prompts": -0.5}, "'num_prompts' is -0.5, not a request count (a whole number >= 0)"),
    ],
)
def test_a_number_that_cannot_be_a_count_is_refused_naming_key_and_value(record: dict[str, Any], says: str) -> None:
    with pytest.raises(ParseError) as info:
        request_counts(record)
    assert str(info.value) == says


def test_whole_floats_and_zero_are_counts() -> None:
    assert request_counts({"completed": 5.0, "failed": 2.0, "num_prompts": 7.0}) == RequestCounts(5, 2, 7)
    assert request_counts({"completed": 0, "failed": 0}) == RequestCounts(0, 0, 0)


def test_more_requests_than_were_sent_is_refused_and_exactly_as_many_is_not() -> None:
    # 7 + 3 = 10 of 10 sent: fine; 8 + 3 = 11 > 10: refused; 11 + 0 (no failed count) > 10: refused
    assert request_counts({"completed": 7, "failed": 3, "num_prompts": 10}) == RequestCounts(7, 3, 10)
    with pytest.raises(ParseError) as info:
        request_counts({"completed": 8, "failed": 3, "num_prompts": 10})
    assert str(info.value) == "8 completed and 3 failed requests are more than the 10 sent"
    with pytest.raises(ParseError) as info:
        request_counts({"completed": 11, "num_prompts": 10})
    assert str(info.value) == "11 completed and 0 failed requests are more than the 10 sent"
    assert request_counts({"completed": 10, "num_prompts": 10}) == RequestCounts(10, None, 10)


def _single(*records: dict[str, Any]) -> ParserDef:
    return ParserDef("t", "test record", lambda text, pattern: [dict(r) for r in records], single=True)


def test_a_single_formats_note_names_the_lines_and_uses_the_last_of_three() -> None:
    p = _single({"k": 1, LINE_KEY: 4}, {"k": 2, LINE_KEY: 7}, {"k": 3, LINE_KEY: 9})
    assert p.parse_noted("x") == (
        [{"k": 3}],
        [f"the output holds 3 t result records (lines 4, 7, 9): used the last one (line 9) {APPENDED}"],
    )


def test_a_single_formats_note_without_line_numbers_says_the_last() -> None:
    p = _single({"k": 1}, {"k": 2}, {"k": 3})
    assert p.parse_noted("x") == (
        [{"k": 3}],
        [f"the output holds 3 t result records: used the last one (the last) {APPENDED}"],
    )


def test_a_single_formats_note_with_a_line_unknown_lists_none_but_names_the_last_when_known() -> None:
    p = _single({"k": 1, LINE_KEY: 4}, {"k": 2}, {"k": 3, LINE_KEY: 9})
    assert p.parse_noted("x") == (
        [{"k": 3}],
        [f"the output holds 3 t result records: used the last one (line 9) {APPENDED}"],
    )
    p = _single({"k": 1, LINE_KEY: 4}, {"k": 2, LINE_KEY: 7}, {"k": 3})
    assert p.parse_noted("x") == (
        [{"k": 3}],
        [f"the output holds 3 t result records: used the last one (the last) {APPENDED}"],
    )


def test_a_single_format_with_one_record_has_no_note() -> None:
    assert _single({"k": 1, LINE_KEY: 2}).parse_noted("x") == ([{"k": 1}], [])
