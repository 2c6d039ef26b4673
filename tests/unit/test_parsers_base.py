"""The shared parser helpers (``orchestrator/parsers/base.py``) at the edges its mutation run found unguarded
(docs/testing.md): the last JSON line of a document, bad lines skipped, list indices, request totals and failures
from SGLang's lists, and a format that selects a case's record."""

from __future__ import annotations

from typing import Any

import pytest

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


def test_number_at_follows_one_rule_for_json_numbers_and_numeric_strings() -> None:
    """Integers within +-2**53 whole, floats finite, numeric strings (ASCII) read as the JSON number they spell."""
    from orchestrator.parsers.base import INT_MAX, INT_MIN, UnfitNumber, number_at

    assert (INT_MIN, INT_MAX) == (-(2**53), 2**53)
    for value, want in ((INT_MAX, INT_MAX), (INT_MIN, INT_MIN), ("9007199254740992", INT_MAX),
                        ("-9007199254740992", INT_MIN), (" +12 ", 12), ("12", 12), ("-.5", -0.5),
                        ("1.", 1.0), ("1.5E+3", 1500.0), (2.5, 2.5)):  # fmt: skip
        got = number_at({"a": value}, "a")
        assert got == want and type(got) is type(want), (value, got)
    for value in (True, None, "abc", "", "1_000", "\u0661", "0x10", [1], {"b": 1}, "1e", "--1"):
        assert number_at({"a": value}, "a") is None, value
    for value, shown in ((2**63, "9223372036854775808"), (INT_MIN - 1, "-9007199254740993"),
                         (INT_MAX + 1, "9007199254740993"), (2**63 - 1, "9223372036854775807"),
                         ("9223372036854775808", "9223372036854775808"),
                         (" -9007199254740993", "-9007199254740993")):  # fmt: skip
        try:
            number_at({"a": value}, "a")
        except UnfitNumber as exc:
            assert str(exc) == (
                f"{shown}, an integer past 2**53, which the store's numbers (IEEE 754 doubles) cannot hold exactly "
                "(a figure that large is written as a float, 1.8e19, or in a larger unit)"
            )
        else:
            raise AssertionError(f"{value!r} was taken")
    for value, shown in ((float("nan"), "nan"), (float("-inf"), "-inf"), ("NaN", "NaN"), ("-Infinity", "-Infinity"),
                         ("inf", "inf")):  # fmt: skip
        try:
            number_at({"a": value}, "a")
        except UnfitNumber as exc:
            assert str(exc) == f"{shown}, not a finite number (NaN, an infinity, or past float's range): no measurement"
        else:
            raise AssertionError(f"{value!r} was taken")
    for value in ("1e400", "-2E+999"):  # a number written past a double's range: named as written, not as inf
        with pytest.raises(UnfitNumber) as unfit:
            number_at({"a": value}, "a")
        assert str(unfit.value) == f"{value}, past the range of a double (±1.8e308): no measurement"
    assert lookup({"a": 2**63}, "a") is None and lookup({"a": "nan"}, "a") is None  # lookup: None, never raises
    assert number_at({"a": [1, 2]}, "a.\u0661") is None  # a list index is ASCII digits too


def test_extract_names_the_metric_and_path_of_an_unfit_value_and_never_falls_back() -> None:
    from orchestrator.parsers.base import UnfitNumber, extract

    assert extract([{"x": 1}, {"x": 2}, {"y": 3}], {"m": "x", "n": "z"}) == ({"m": 2}, ["n"])
    for paths, where in (({"m": "x"}, "metric 'm' (path x)"), ({"x": "x"}, "metric 'x'")):
        try:
            extract([{"x": 1}, {"x": 2**64}], paths)
        except UnfitNumber as exc:
            assert str(exc).startswith(f"{where} in the output is 18446744073709551616, an integer past 2**53")
        else:
            raise AssertionError("an unfit last value fell back to an earlier record")
