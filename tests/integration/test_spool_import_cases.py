"""``orch runs import`` of edited copies of a real 3-case command-suite spool, through the CLI on SQLite and
PostgreSQL (issue 10, the tester's F6): a started case with no result or error before ``done``, a line of a type the
agent never writes, and a second ``hello`` each leave one error row at a position and a host that is not
``completed`` (exit 1) — however the done counts were edited to agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.store.repo import Store
from tests.integration.test_spool_import_checks import RUN_ID, _line, _write, echo_lines, import_cli, suite_dir

__all__ = ["suite_dir"]  # the fixture, used by name below

OTHER_RUN = "01a2aaaa-0000-7000-8000-0000000000ff"


def _renumbered(lines: list[bytes], *, results: int) -> list[bytes]:
    """``lines`` with each seq set to its position and the done counts set to agree with what is left (as the
    tester edited them: lines before done, ``results``, no errors)."""
    out = []
    for pos, raw in enumerate(lines):
        doc: dict[str, Any] = json.loads(raw)
        doc["seq"] = pos
        if doc["type"] == "done":
            doc["counts"] = {"lines": pos, "results": results, "errors": 0}
        out.append(json.dumps(doc).encode())
    return out


def _rows(db_url: str) -> list[tuple[int, int | None, str, str | None]]:
    s = Store.from_url(db_url)
    try:
        return [(r.seq, r.case_index, r.status, r.error) for r in s.results(RUN_ID).items]
    finally:
        s.close()


def _status(db_url: str) -> tuple[str, str | None, str | None]:
    s = Store.from_url(db_url)
    try:
        detail = s.get_run(RUN_ID)
        hr = detail.host_run("l1")
        assert hr is not None
        return detail.status, hr.status, hr.error
    finally:
        s.close()


def test_a_started_case_whose_result_line_was_deleted_fails_the_host_naming_it(
    tmp_path: Path, db_url: str, suite_dir: Path
) -> None:
    orch = import_cli(tmp_path, db_url, suite_dir)
    lines = echo_lines()
    del lines[2]  # case 0's result; its case_start (line 1) stays
    spool = _write(tmp_path / "events.jsonl", _renumbered(lines, results=2))
    out = orch(str(spool))
    assert out.returncode == 1, out.stdout + out.stderr
    named = ("case 0 (started at line 1) has no result or error before the done line (line 6); the agent writes "
             "one per case it starts, so the spool lacks its line")  # fmt: skip
    assert named in " ".join(out.stdout.split()), out.stdout  # free text wraps at words to the width
    assert "Traceback" not in out.stderr
    rows = _rows(db_url)
    assert [(seq, ci, st) for seq, ci, st, _ in rows] == [(3, 1, "ok"), (5, 2, "ok"), (6, 0, "error")]
    assert rows[2][3] == named
    s = Store.from_url(db_url)
    try:  # keyed by the case's parameters like its other rows: the command's argv and timeout stay out
        assert [r.case for r in s.results(RUN_ID).items] == [{"t": 2}, {"t": 3}, {"t": 1}]
    finally:
        s.close()
    run_status, host_status, error = _status(db_url)
    assert (run_status, host_status) == ("partial", "failed") and error == named
    again = orch(str(spool), "--json")  # idempotent: the same verdict, no conflict, nothing stored twice
    assert again.returncode == 1, again.stdout + again.stderr
    doc = json.loads(again.stdout)
    assert (doc["new_lines"], doc["status"], doc["results"], doc["errors"]) == (0, "failed", 2, 1)
    assert len(_rows(db_url)) == 3


def test_a_result_line_whose_type_was_changed_is_an_error_row_for_its_case(
    tmp_path: Path, db_url: str, suite_dir: Path
) -> None:
    orch = import_cli(tmp_path, db_url, suite_dir)
    lines = echo_lines()
    doc = json.loads(lines[2])
    doc["type"] = "Result"
    lines[2] = json.dumps(doc).encode()
    out = orch(str(_write(tmp_path / "events.jsonl", _renumbered(lines, results=2))))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "0 errors on the host, 1 stored" in " ".join(out.stdout.split()), out.stdout
    rows = _rows(db_url)
    assert [(seq, ci, st) for seq, ci, st, _ in rows] == [(2, 0, "error"), (4, 1, "ok"), (6, 2, "ok")]
    assert (rows[0][3] or "").startswith("agent line 2 (Result): unknown event type 'Result'; the agent writes only")
    assert _status(db_url)[1] == "failed"


def test_an_unknown_type_and_a_second_hello_are_error_rows_at_their_positions(
    tmp_path: Path, db_url: str, suite_dir: Path
) -> None:
    orch = import_cli(tmp_path, db_url, suite_dir)
    lines = echo_lines()
    hello2 = json.loads(lines[0])
    hello2.update(run_id=OTHER_RUN, host="intruder", facts={"hostname": "intruder"})
    lines[3:3] = [_line(3, "zzz", note="from nowhere"), json.dumps(hello2).encode()]
    out = orch(str(_write(tmp_path / "events.jsonl", _renumbered(lines, results=3))))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "0 errors on the host, 2 stored" in " ".join(out.stdout.split()), out.stdout
    rows = _rows(db_url)
    assert [(seq, ci, st) for seq, ci, st, _ in rows] == [(2, 0, "ok"), (3, None, "error"), (4, None, "error"),
                                                          (6, 1, "ok"), (8, 2, "ok")]  # fmt: skip
    assert (rows[1][3] or "").startswith("agent line 3 (zzz): unknown event type 'zzz'")
    assert (rows[2][3] or "").startswith(f"agent line 4 (hello): a second hello (run {OTHER_RUN!r}, host 'intruder')")
    assert _status(db_url)[:2] == ("partial", "failed")
