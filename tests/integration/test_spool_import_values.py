"""``orch runs import`` (the real CLI, SQLite and PostgreSQL) of a real 3-case command-suite spool in which one
result line holds a number no store can hold (an integer of 401 or 5,000 digits, ``1e400``; ``1e-400``, which a
double holds only as 0) or a lone surrogate
(``"m\\ud800s"``): that line is one error row naming its seq and the field, the run ends (never left
``running``), nothing is stored replaced, and importing again changes nothing (issue 10)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.store.repo import Store
from tests.integration.test_spool_import_checks import RUN_ID, _result, _write, echo_lines, import_cli, suite_dir

__all__ = ["suite_dir"]  # the fixture, used by name

BIG = "1" + "0" * 400


def _with_value(value_text: str, *, field: str = "value") -> bytes:
    """Line 4 (the result of case 1) with metrics.wall_ms.<field> written as ``value_text`` (a raw JSON token)."""
    line = _result(4, 1)
    old = b'"value": 2.0' if field == "value" else b'"median": 2.0'
    assert old in line
    return line.replace(old, f'"{field}": {value_text}'.encode())


@pytest.mark.parametrize(
    ("line4", "says"),
    [
        (_with_value(BIG), "metrics.wall_ms.value is 10000000000000000000...0000000000 (401 digits), past the range"),
        (_with_value("-" + BIG), "metrics.wall_ms.value is -1000000000000000000...0000000000 (401 digits)"),
        (_with_value("1e400"), "metrics.wall_ms.value is 1e400, past the range of a double"),
        (_with_value("9" * 5000, field="median"), "metrics.wall_ms.median is 99999999999999999999...9999999999 "
                                                  "(5,000 digits)"),
        (_result(4, 1).replace(b'"unit": "ms"', b'"unit": "m\\ud800s"'),
         "metrics.wall_ms.unit holds a lone surrogate"),
        (_with_value("1e-400"), "metrics.wall_ms.value is 1e-400, not zero but below the smallest double"),
        (_with_value("-0." + "0" * 350 + "25", field="median"),
         "metrics.wall_ms.median is -0.00000000000000000...0000000025 (353 digits), not zero but below"),
        # two metrics that are one once a NUL is stored as U+2400 (a tester's: one of them dropped, completed)
        (_result(4, 1).replace(b'"metrics": {', b'"metrics": {"t\\u0000": {"value": 1.0, "unit": "ms"}, '
                               b'"t\xe2\x90\x80": {"value": 2.0, "unit": "ms"}, '),
         "the keys 't\\x00' and 't\u2400' of metrics would both be stored as 't\u2400'"),
    ],
    ids=["401-digits", "minus-401-digits", "1e400", "5000-digits", "surrogate", "1e-400", "350-zeros", "nul-key"],
)
def test_an_unholdable_line_is_one_error_row_through_the_cli(
    tmp_path: Path, db_url: str, suite_dir: Path, line4: bytes, says: str
) -> None:
    orch = import_cli(tmp_path, db_url, suite_dir)
    lines = echo_lines()
    lines[4] = line4
    spool = _write(tmp_path / "events.jsonl", lines)
    for attempt in range(2):  # importing again: the same answer, nothing stored twice
        res = orch(str(spool))
        assert res.returncode == 1, (attempt, res.stdout, res.stderr)
        assert "Traceback" not in res.stderr and "orch hit a bug" not in res.stderr, res.stderr
        assert "partial — 2 results, 1 error stored; run partial" in res.stdout, res.stdout
        assert f"1 case failed: agent line 4 (result): {says}"[:150] in res.stdout, res.stdout
    store = Store.from_url(db_url)
    try:
        assert store.get_run(RUN_ID).status == "partial"
        rows = store.results(RUN_ID).items
        assert [(r.seq, r.case_index, r.status) for r in rows] == [(2, 0, "ok"), (4, 1, "error"), (6, 2, "ok")]
        assert says in (rows[1].error or "")
        assert rows[1].metrics in ({}, None)
        stored = json.dumps([[r.case, r.metrics, r.info, r.error] for r in rows])
        assert "\\ufffd" not in stored and "\ufffd" not in stored
        assert store.last_seq(RUN_ID, "l1") == 7
    finally:
        store.close()


@pytest.mark.parametrize(
    ("line4", "key"),
    [
        (_with_value("2.0, \"value\": 2000.0"), "metrics.wall_ms.value"),  # two figures, a thousand times apart
        (_result(4, 1).replace(b'"case": {', b'"case": {"t": 20, '), "case.t"),
        (_result(4, 1).replace(b'"metrics": {', b'"metrics": {"wall_ms": {"value": 1.0, "unit": "ms"}, '),
         "metrics.wall_ms"),
        (_with_value("2.0, \"value\" : 2000.0").replace(b'"value": 2.0', b'"value" : 2.0'),
         "metrics.wall_ms.value"),  # whitespace before the colons (a tester's: stored 2000.0, completed)
    ],
    ids=["value", "case-param", "metric", "space-before-colon"],
)
def test_a_key_written_twice_below_the_top_level_is_one_error_row_through_the_cli(
    tmp_path: Path, db_url: str, suite_dir: Path, line4: bytes, key: str
) -> None:
    """The testers' finding: a result line writing a metric's ``value`` (or a case parameter, or a whole metric)
    twice was stored with the last one, as JSON readers keep it. Now, as for a repeat at the top level, the line is
    one error row naming the key by its path, and the run is not completed."""
    orch = import_cli(tmp_path, db_url, suite_dir)
    lines = echo_lines()
    lines[4] = line4
    spool = _write(tmp_path / "events.jsonl", lines)
    res = orch(str(spool))
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr and "orch hit a bug" not in res.stderr, res.stderr
    store = Store.from_url(db_url)
    try:
        assert store.get_run(RUN_ID).status == "partial"
        rows = store.results(RUN_ID).items
        assert [(r.seq, r.status) for r in rows] == [(2, "ok"), (4, "error"), (6, "ok")], rows
        assert f"agent line 4 writes the key {key!r} twice in one object" in (rows[1].error or ""), rows[1].error
        assert rows[1].metrics in ({}, None)
    finally:
        store.close()
