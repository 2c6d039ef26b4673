"""linecheck's sentences exactly, field by field (the error row a wrong-typed line becomes says them), the 32-bit
bound of case_index, the 80-character cut of a shown value, and the metrics ``checked_fields`` hands on — the
mutation run of linecheck.py (docs/testing.md) found each unchecked by test_line_checks.py."""

from __future__ import annotations

from typing import Any

import pytest

from orchestrator.linecheck import CASE_INDEX_MAX, checked_fields, field_problem

METRICS = {"wall_ms": {"value": 2, "unit": "ms", "median": 1, "samples": [1, 3]}}
CLEAN = ({"wall_ms": {"value": 2.0, "unit": "ms", "median": 1.0}}, {"wall_ms": [1, 3]})


@pytest.mark.parametrize(
    ("typ", "data", "says"),
    [
        ("hello", {"run_id": 7}, "run_id must be a string, got 7"),
        ("hello", {"run_id": "r", "host": 3}, "host must be a string, got 3"),
        ("hello", {"run_id": "r", "suite": 1}, "suite must be a string, got 1"),
        ("hello", {"agent_version": 1.5}, "agent_version must be a string, got 1.5"),
        ("hello", {"facts": "gpu"}, "facts must be an object, got 'gpu'"),
        ("hello", {"cases_total": -1}, "cases_total must be a non-negative integer, got -1"),
        ("log", {"level": 3, "message": "m"}, "level must be a string, got 3"),
        ("log", {"level": "info", "message": ["m"]}, "message must be a string, got ['m']"),
        ("error", {"message": "m", "case_index": -2}, f"case_index must be a non-negative integer up to "
                                                      f"{CASE_INDEX_MAX}, got -2"),
        ("error", {"message": "m", "case": "t=1"}, "case must be an object of parameters, got 't=1'"),
        ("error", {"message": b"m"}, "message must be a string, got b'm'"),
        ("error", {}, "message must be a string, got None"),
        ("done", {"status": "great"}, "status must be one of cancelled, completed, failed, got 'great'"),
        ("done", {"status": None}, "status must be one of cancelled, completed, failed, got None"),
        ("done", {"counts": [1]}, "counts must be an object of lines, results, errors, got [1]"),
        ("done", {"counts": {"errors": True}}, "counts.errors must be a non-negative integer, got True"),
        ("done", {"counts": {}, "reason": 5}, "reason must be a string, got 5"),
        ("done", {"reason": 5}, None),  # without counts the reason is not looked at
        ("case_start", {"case_index": 0, "case": None}, "case must be an object of parameters, got None"),
        ("result", {"case_index": 0, "case": {}, "metrics": None},
         "metrics must be an object of name -> {value, unit, ...}, got None"),
        ("result", {"case_index": 0, "case": {}, "metrics": {"m": {"value": "1", "unit": "ms"}}},
         "metrics: metric 'm' needs a finite number 'value' and a string 'unit'"),
        ("result", {"case_index": 0, "case": {}, "metrics": {}, "info": 3}, "info must be an object, got 3"),
        ("unknown", {"case_index": "x", "message": 1}, None),
    ],
)  # fmt: skip
def test_the_first_wrong_field_is_named_exactly(typ: str, data: dict[str, Any], says: str | None) -> None:
    assert field_problem(typ, data) == says


@pytest.mark.parametrize(
    "data",
    [
        {"run_id": None, "suite": None, "agent_version": None, "facts": None, "cases_total": None},
        {"run_id": "r", "suite": "s", "agent_version": "a", "facts": {}, "cases_total": 0},
    ],
)
def test_hello_fields_may_be_null_or_of_their_type(data: dict[str, Any]) -> None:
    assert field_problem("hello", data) is None


def test_a_done_line_without_a_status_is_completed() -> None:
    assert field_problem("done", {}) is None
    assert field_problem("done", {"counts": {"lines": 0, "results": 0, "errors": 0}, "reason": None}) is None


def test_log_and_error_fields_may_be_absent_or_null() -> None:
    assert field_problem("log", {}) is None
    assert field_problem("log", {"level": None, "message": None}) is None
    assert field_problem("log", {"level": "warn", "message": "disk 91% full"}) is None
    assert field_problem("error", {"message": "m", "case_index": None, "case": None}) is None


@pytest.mark.parametrize("typ", ["case_start", "result", "error"])
def test_case_index_is_a_32_bit_column(typ: str) -> None:
    base: dict[str, Any] = {"case": {}, "metrics": {}, "message": "m"}
    assert field_problem(typ, {**base, "case_index": CASE_INDEX_MAX}) is None
    over = field_problem(typ, {**base, "case_index": CASE_INDEX_MAX + 1})
    if typ == "error":
        assert over == f"case_index must be a non-negative integer up to {CASE_INDEX_MAX}, got {CASE_INDEX_MAX + 1}"
    else:
        assert over == (
            f"case_index must be at most {CASE_INDEX_MAX} (the store's column is 32-bit), got {CASE_INDEX_MAX + 1}"
        )


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("x" * 78, repr("x" * 78)),  # 80 characters with the quotes: shown whole
        ("x" * 79, repr("x" * 79)[:77] + "..."),  # 81: cut to 77 and "..."
        ("y" * 200, "'" + "y" * 76 + "..."),
    ],
)
def test_a_long_value_is_shown_cut_to_80_characters(value: str, shown: str) -> None:
    said = field_problem("done", {"status": value})
    assert said == f"status must be one of cancelled, completed, failed, got {shown}"
    assert field_problem("log", {"message": value.encode()}) == (
        f"message must be a string, got {repr(value.encode())[:77]}..."  # b'..' is 81 characters or more
    )
    assert len(shown) <= 80


def test_checked_fields_hands_on_a_well_typed_results_clean_metrics() -> None:
    data = {"case_index": 0, "case": {}, "metrics": METRICS, "info": {"k": 1}}
    assert checked_fields("result", data) == (None, CLEAN)
    assert checked_fields("result", {**data, "info": None}) == (None, CLEAN)
    assert checked_fields("result", {**data, "info": []}) == ("info must be an object, got []", None)
    assert checked_fields("result", {**data, "case": 1}) == ("case must be an object of parameters, got 1", None)
    assert checked_fields("error", {"message": "m", "metrics": METRICS}) == (None, None)
