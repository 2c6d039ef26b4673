"""``orch runs import`` (the real CLI, SQLite and PostgreSQL) of a real 3-case command-suite spool whose ``ts`` is
out of range or whose last line lacks its newline (issue 10, tester's F5 and F7).

F5: a hello with ``"ts": 1e12`` crashed the import (``ValueError: year 33658 is out of range``, exit 70), ``1e300``
and ``-1e12`` with ``OverflowError``, and ``1e11`` stored a run started in year 5138. Now the hello is refused
(exit 2, ``PATH:1``, the accepted range) and any other line out of range is one error row.
F7: a spool whose done line lacked only its newline said the run "had not finished on the host", and a file of one
line without its newline was "empty". Now the last line without a newline is named as such."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.errors import NotFoundError, UsageError
from orchestrator.spool_import import import_spool
from orchestrator.store.repo import Store
from orchestrator.suites.loader import load_registry
from tests.integration.test_spool_import_checks import RUN_ID, _write, echo_lines, import_cli, suite_dir

__all__ = ["suite_dir"]  # the fixture, used by name

RANGE = "is outside the accepted range of ts, unix seconds from 946684800 (2000-01-01 00:00:00 UTC) to "
CUT = "has no newline: the spool was copied while the agent wrote it, or cut; that line was not imported"


def _with_ts(line: bytes, ts: str) -> bytes:
    doc = json.loads(line)
    old = f'"ts": {json.dumps(doc["ts"])}'.encode()
    assert old in line
    return line.replace(old, f'"ts": {ts}'.encode())


def _no_run(db_url: str) -> bool:
    store = Store.from_url(db_url)
    try:
        store.get_run(RUN_ID)
    except NotFoundError:
        return True
    finally:
        store.close()
    return False


@pytest.mark.parametrize(
    ("ts", "when"),
    [
        ("1e12", "(outside the years 1-9999)"),  # was: ValueError: year 33658 is out of range, exit 70
        ("1e300", "(outside the years 1-9999)"),  # was: OverflowError: timestamp out of range, exit 70
        ("-1e12", "(outside the years 1-9999)"),
        ("1e11", "(5138-11-16 09:46:40 UTC)"),  # was: stored as a run started in year 5138, sorted first
        ("0", "(1970-01-01 00:00:00 UTC)"),  # a host whose clock was never set
    ],
)
def test_a_hello_whose_ts_is_out_of_range_is_refused_naming_the_line_and_the_range(
    tmp_path: Path, db_url: str, suite_dir: Path, ts: str, when: str
) -> None:
    orch = import_cli(tmp_path, db_url, suite_dir)
    lines = echo_lines()
    lines[0] = _with_ts(lines[0], ts)
    spool = _write(tmp_path / "events.jsonl", lines)
    res = orch(str(spool))
    err = " ".join(res.stderr.split())  # the error line as printed, whatever the terminal width
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr and "orch hit a bug" not in res.stderr, res.stderr
    assert f"{spool}:1: the hello line is refused: agent line 0 (hello): ts {float(ts)!r} {when} {RANGE}" in err, err
    assert "nothing was imported" in err and "set the host's clock" in err
    assert _no_run(db_url)


def test_a_hello_refused_for_a_key_written_twice_gets_no_clock_advice(
    tmp_path: Path, db_url: str, suite_dir: Path
) -> None:
    """The tester's finding: a hello refused for a repeated key got the hint for a wrong host clock."""
    orch = import_cli(tmp_path, db_url, suite_dir)
    lines = echo_lines()
    lines[0] = lines[0].replace(b'"cases_total": 3', b'"cases_total": 3, "cases_total": 2')
    spool = _write(tmp_path / "events.jsonl", lines)
    res = orch(str(spool))
    err = " ".join(res.stderr.split())
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "the hello line is refused: agent line 0 writes the key 'cases_total' twice in one object" in err, err
    assert "clock" not in err and "the agent writes each line once, whole, and never edits it" in err, err
    assert _no_run(db_url)


@pytest.mark.parametrize(("pos", "ts"), [(4, "1e11"), (4, "1e300"), (7, "1e12"), (3, "-5")])
def test_a_line_whose_ts_is_out_of_range_is_one_error_row_and_the_run_is_not_completed(
    tmp_path: Path, db_url: str, suite_dir: Path, pos: int, ts: str
) -> None:
    orch = import_cli(tmp_path, db_url, suite_dir)
    lines = echo_lines()
    lines[pos] = _with_ts(lines[pos], ts)
    spool = _write(tmp_path / "events.jsonl", lines)
    for attempt in range(2):  # importing again: the same answer, nothing stored twice
        res = orch(str(spool))
        assert res.returncode == 1, (attempt, res.stdout, res.stderr)
        assert "Traceback" not in res.stderr and "orch hit a bug" not in res.stderr, res.stderr
    store = Store.from_url(db_url)
    try:
        detail = store.get_run(RUN_ID)
        assert detail.status in ("partial", "failed") and detail.started_at.timestamp() == 1_790_000_000.0
        errors = store.results(RUN_ID, status="error").items
        assert [r.seq for r in errors] == [pos]
        assert f"agent line {pos} (" in (errors[0].error or "") and RANGE in (errors[0].error or "")
    finally:
        store.close()


def test_a_done_line_lacking_only_its_newline_is_named_so_and_taken_once_it_has_one(
    tmp_path: Path, db_url: str, suite_dir: Path
) -> None:
    orch = import_cli(tmp_path, db_url, suite_dir)
    spool = _write(tmp_path / "events.jsonl", echo_lines())
    whole = spool.read_bytes()
    spool.write_bytes(whole[:-1])
    done_bytes = len(echo_lines()[-1])
    res = orch(str(spool))
    out = " ".join(res.stdout.split())
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "unfinished — 3 results, 0 errors stored; run running" in out, out
    assert f"l1: the last line ({done_bytes:,} bytes) {CUT} (the agent writes every line whole, with its newline); " \
           f"it reads as the done line: copy the spool again once the agent has ended, or, if this copy is known " \
           f"whole but for its final newline, add it (printf '\\n' >> {spool}) and import again" in out, out
    assert "had not finished" not in out and "empty" not in out
    with open(spool, "ab") as f:  # what the message says to do
        f.write(b"\n")
    assert spool.read_bytes() == whole
    res = orch(str(spool))
    assert res.returncode == 0 and "completed — 3 results, 0 errors stored; run completed" in res.stdout, res.stdout


def test_a_cut_result_line_is_named_as_a_line_without_newline(tmp_path: Path, db_url: str, suite_dir: Path) -> None:
    orch = import_cli(tmp_path, db_url, suite_dir)
    lines = echo_lines()
    spool = tmp_path / "events.jsonl"
    spool.write_bytes(b"".join(line + b"\n" for line in lines[:4]) + lines[4][:50])
    res = orch(str(spool))
    out = " ".join(res.stdout.split())
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert f"l1: the last line (50 bytes) {CUT} (the agent writes every line whole, with its newline)" in out, out
    assert "reads as the done line" not in out and "had not finished" not in out


def test_a_file_of_one_line_without_its_newline_is_not_called_empty(
    tmp_path: Path, db_url: str, suite_dir: Path
) -> None:
    orch = import_cli(tmp_path, db_url, suite_dir)
    hello = echo_lines()[0]
    spool = tmp_path / "onlyhello.jsonl"
    spool.write_bytes(hello)
    res = orch(str(spool))
    err = " ".join(res.stderr.split())
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert f"{spool}: the last line ({len(hello):,} bytes) {CUT}" in err and "the file holds no whole line" in err
    assert "empty" not in err and "Traceback" not in err
    assert _no_run(db_url)
    spool.write_bytes(b"")
    res = orch(str(spool))
    assert res.returncode == 2 and f"{spool} is empty (0 bytes)" in " ".join(res.stderr.split()), res.stderr


def test_a_line_past_the_cap_without_newline_is_named_by_its_size(
    store: Store, tmp_path: Path, suite_dir: Path
) -> None:
    """The tester's 100 MB file with no newline (past the 64 MiB cap), here past a 4 KiB cap."""
    spool = tmp_path / "events.jsonl"
    spool.write_bytes(b"x" * 100_000)
    with pytest.raises(UsageError, match=r"the last line \(100,000 bytes\) has no newline") as exc:
        import_spool(store, spool, host="l1", registry=load_registry([suite_dir]), cap=4096)
    assert "empty" not in exc.value.message

