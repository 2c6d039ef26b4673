"""``orch runs import`` of crafted copies of a real 3-case command-suite spool, on SQLite and PostgreSQL: a line
orch would have to change to store is one error row (the run not ``completed``, the CLI saying so), and a spool
that conflicts with the stored run is refused with exit 2, naming what differs — nothing is stored changed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import UsageError
from orchestrator.spool_import import import_spool
from orchestrator.store.repo import Store
from orchestrator.suites.loader import load_registry

RUN_ID = "01a2aaaa-0000-7000-8000-0000000000e7"

ECHO_SUITE = """\
name: echo-t
description: echo t=N, parsed back
command: ["/bin/echo", "t={t}"]
params:
  t: {type: list, default: [1, 2, 3], help: "the number echoed"}
parser: {name: regex, pattern: 't=(?P<t>[0-9]+)'}
metrics:
  t: {path: t, unit: count}
"""


def _line(seq: int, type_: str, **fields: Any) -> bytes:
    return json.dumps({"v": 1, "seq": seq, "type": type_, "ts": 1_790_000_000.0 + seq, **fields}).encode()


def _case(ci: int) -> dict[str, Any]:
    return {"t": ci + 1, "argv": ["/bin/echo", f"t={ci + 1}"], "timeout_s": 600}


def _result(seq: int, ci: int, **over: Any) -> bytes:
    out = f"t={ci + 1}\n"
    fields: dict[str, Any] = {
        "case_index": ci,
        "case": _case(ci),
        "metrics": {"wall_ms": {"value": 1.0 + ci, "unit": "ms", "median": 1.0 + ci, "n": 1, "samples": [1.0 + ci]}},
        "info": {"exit_status": 0, "parsed": "stdout", "stdout": out, "outputs": [out]},
    }
    fields.update(over)
    return _line(seq, "result", **fields)


def echo_lines(suite: str = "echo-t", results: int = 3) -> list[bytes]:
    """An echo-t spool as the agent writes it: hello, (case_start, result) x 3, done — 8 lines."""
    lines = [_line(0, "hello", agent_version="a" * 64, run_id=RUN_ID, suite=suite,
                   facts={"hostname": "l1"}, cases_total=3)]  # fmt: skip
    for ci in range(3):
        lines += [_line(len(lines), "case_start", case_index=ci, case=_case(ci)), _result(len(lines) + 1, ci)]
    lines.append(_line(7, "done", status="completed", counts={"lines": 7, "results": results, "errors": 0}))
    return lines


def _write(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    d = tmp_path / "suites"
    d.mkdir()
    (d / "echo-t.yaml").write_text(ECHO_SUITE)
    return d


def _import(store: Store, path: Path, suite_dir: Path) -> Any:
    return import_spool(store, path, host="l1", registry=load_registry([suite_dir]))


def _rows(store: Store) -> list[tuple[int, int | None, str]]:
    return [(r.seq, r.case_index, r.status) for r in store.results(RUN_ID).items]


def test_the_real_spool_is_completed(store: Store, tmp_path: Path, suite_dir: Path) -> None:
    out = _import(store, _write(tmp_path / "events.jsonl", echo_lines()), suite_dir)
    assert (out.status, out.run_status, out.results, out.errors, out.error) == ("completed", "completed", 3, 0, None)
    assert [r.metrics["t"]["value"] for r in store.results(RUN_ID).items] == [1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("metrics", "says"),
    [
        ({"wall_ms": {"value": 1.0, "unit": "ms", "median": "fast"}}, "median must be a finite number, got 'fast'"),
        ([1, 2], "metrics must be an object of name -> {value, unit, ...}, got [1, 2]"),
    ],
)
def test_a_result_with_a_malformed_metric_is_an_error_row_not_a_dropped_metric(
    store: Store, tmp_path: Path, suite_dir: Path, metrics: Any, says: str
) -> None:
    lines = echo_lines()
    lines[2] = _result(2, 0, metrics=metrics)
    out = _import(store, _write(tmp_path / "events.jsonl", lines), suite_dir)
    # the agent's own result line, refused for a field: that case failed, nothing was lost (protocol.JUDGED_KEY);
    # before, the host was 'failed' with "3 results on the host, 2 stored", as if the store had lost a line
    assert (out.status, out.run_status, out.results, out.errors) == ("partial", "partial", 2, 1)
    assert (out.error or "").startswith("1 case failed: agent line 2 (result): metrics") and "stored" not in (
        out.error or ""
    )
    assert _rows(store) == [(2, 0, "error"), (4, 1, "ok"), (6, 2, "ok")]
    [err] = store.results(RUN_ID, status="error").items
    assert (err.error or "").startswith("agent line 2 (result): metrics") and says in (err.error or "")
    assert err.metrics == {}


def test_a_result_for_another_case_than_the_one_started_is_an_error_row(
    store: Store, tmp_path: Path, suite_dir: Path
) -> None:
    lines = echo_lines()
    lines[2] = _result(2, 1)  # right after the case_start of case 0
    out = _import(store, _write(tmp_path / "events.jsonl", lines), suite_dir)
    assert (out.status, out.run_status) == ("failed", "partial")
    # case 0 started and has no row of its own: one more error row, at the done line, names it (issue 10)
    assert _rows(store) == [(2, 1, "error"), (4, 1, "ok"), (6, 2, "ok"), (7, 0, "error")]
    assert [r.case_index for r in store.results(RUN_ID, status="ok").items] == [1, 2]
    err, unfinished = store.results(RUN_ID, status="error").items
    assert "it is for case 1, but the case started last is case 0" in (err.error or "")
    assert (unfinished.error or "").startswith("case 0 (started at line 1) has no result or error before the done")


def test_bytes_that_are_not_utf8_are_an_error_row_not_replacement_characters(
    store: Store, tmp_path: Path, suite_dir: Path
) -> None:
    lines = echo_lines()
    lines[4] = lines[4].replace(b'"case": {"t": 2,', b'"case": {"tag": "\xff\xfe", "t": 2,')
    assert b"\xff\xfe" in lines[4]
    out = _import(store, _write(tmp_path / "events.jsonl", lines), suite_dir)
    assert (out.status, out.results, out.errors) == ("failed", 2, 2)
    err, unfinished = store.results(RUN_ID, status="error").items
    assert err.seq == 4 and "agent line 4 is not UTF-8 (byte 0xff" in (err.error or "")
    # the unreadable line names no case: case 1 (started at line 3) has no row of its own, one at done names it
    assert (unfinished.seq, unfinished.case_index) == (7, 1)
    assert all("\ufffd" not in json.dumps(r.case) for r in store.results(RUN_ID).items)


def test_one_blank_line_is_one_error_row_and_the_run_ends(store: Store, tmp_path: Path, suite_dir: Path) -> None:
    lines = echo_lines()
    lines.insert(3, b"")
    out = _import(store, _write(tmp_path / "events.jsonl", lines), suite_dir)
    assert (out.status, out.run_status, out.results, out.errors) == ("failed", "partial", 3, 1)
    assert _rows(store) == [(2, 0, "ok"), (3, None, "error"), (5, 1, "ok"), (7, 2, "ok")]
    assert "7 lines on the host before done, 8 stored" in (out.error or "")
    detail = store.get_run(RUN_ID)
    assert detail.status == "partial" and detail.host_run("l1").status == "failed"  # type: ignore[union-attr]


def test_a_done_line_that_is_not_stored_still_ends_the_run(store: Store, tmp_path: Path, suite_dir: Path) -> None:
    lines = echo_lines()
    lines[7] = _line(7, "done", status="completed", counts={"lines": 7, "results": "3", "errors": 0})
    out = _import(store, _write(tmp_path / "events.jsonl", lines), suite_dir)
    assert (out.status, out.run_status) == ("failed", "partial")
    assert "the done line (line 7) was not stored" in (out.error or "")
    assert store.get_run(RUN_ID).status == "partial"


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda ls: ls.__setitem__(0, echo_lines(suite="moe-sweep")[0]),
         "its hello names suite 'moe-sweep', the stored run is of suite 'echo-t'"),  # fmt: skip
        (lambda ls: ls.__setitem__(7, echo_lines(results=4)[7]),
         "line 7: the done line differs (results 4 vs 3 stored)"),  # fmt: skip
        (lambda ls: ls.__setitem__(4, _result(4, 1, metrics={"wall_ms": {"value": 9.0, "unit": "ms"}})),
         "line 4: metric wall_ms.value is 9.0, 2.0 stored"),  # fmt: skip
        (lambda ls: ls.__setitem__(0, ls[0].replace(b'"hostname": "l1"', b'"hostname": "other-node"')),
         "host fact hostname is 'other-node' in the spool, 'l1' stored for l1"),  # fmt: skip
        (lambda ls: ls.__setitem__(0, ls[0].replace(b"a" * 64, b"b" * 64)),
         "its hello names agent bbbbbbbbbbbb, the stored host run agent aaaaaaaaaaaa"),  # fmt: skip
        (lambda ls: ls.__setitem__(0, ls[0].replace(b'"cases_total": 3', b'"cases_total": 2')),
         "its hello announces 2 cases, the stored host run 3 cases"),  # fmt: skip
        (lambda ls: ls.__setitem__(4, ls[4].replace(b'"samples": [2.0]', b'"samples": [2000.0]')),
         "line 4: metric wall_ms.samples[0] is 2000.0, 2.0 stored"),  # fmt: skip
        (lambda ls: ls.__setitem__(4, ls[4].replace(b'"exit_status": 0', b'"exit_status": 1')),
         "line 4: info.exit_status is 1, 0 stored"),  # fmt: skip
        (lambda ls: ls.__setitem__(4, ls[4].replace(b'"ts": 1790000004.0', b'"ts": 1790000099.5')),
         "line 4: ts is 1790000099.5, 1790000004.0 stored"),  # fmt: skip
        (lambda ls: [ls.__setitem__(5, _line(5, "case_start", case_index=2, case={**_case(2), "t": 30})),
                     ls.__setitem__(6, _result(6, 2, case={**_case(2), "t": 30}))],
         "line 6: case parameters {'t': 30} differ from the stored {'t': 3}"),  # fmt: skip
        # the result's alone: it is not its case_start's (an error line), where an ok row is stored
        (lambda ls: ls.__setitem__(6, _result(6, 2, case={**_case(2), "t": 30})),
         "line 6 would be an error row, the store holds an ok row there"),  # fmt: skip
        (lambda ls: [ls.__setitem__(3, _line(3, "case_start", case_index=2, case=_case(2))),
                     ls.__setitem__(4, _result(4, 2))],
         "line 4 is for case 2, the stored row for case 1"),  # fmt: skip
        (lambda ls: ls.__setitem__(4, _result(4, 0)),
         "line 4 would be an error row, the store holds an ok row there"),  # fmt: skip
        (lambda ls: ls.__setitem__(4, _line(4, "log", level="info", message="hi")),
         "line 4 is a log line, the store holds a row of status ok there"),  # fmt: skip
    ],
)
def test_a_spool_that_conflicts_with_the_stored_run_is_refused(
    store: Store, tmp_path: Path, suite_dir: Path, change: Any, says: str
) -> None:
    _import(store, _write(tmp_path / "events.jsonl", echo_lines()), suite_dir)
    before = [(r.seq, r.status, r.metrics) for r in store.results(RUN_ID).items]
    lines = echo_lines() + [b"extra"]
    change(lines)
    lines[-1] = _line(8, "log", level="info", message="a line past the stored ones")
    with pytest.raises(UsageError, match="conflicts with the stored run") as info:
        _import(store, _write(tmp_path / "other.jsonl", lines), suite_dir)
    assert says in info.value.message and "nothing was imported" in info.value.message
    assert [(r.seq, r.status, r.metrics) for r in store.results(RUN_ID).items] == before
    assert store.last_seq(RUN_ID, "l1") == 7 and store.get_run(RUN_ID).status == "completed"


def import_cli(tmp_path: Path, db_url: str, suite_dir: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """``orch runs import ARGS --host l1`` through the real CLI into ``db_url`` (a PostgreSQL database is migrated
    first: the test plugin hands out an empty one)."""
    if db_url.startswith("postgresql"):
        s = Store.from_url(db_url)
        s.upgrade()
        s.close()

    def orch(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "orchestrator", "--db", db_url, "--inventory",
                               str(tmp_path / "none.yaml"), "runs", "import", *args, "--host", "l1",
                               "--suite-dir", str(suite_dir)],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip

    return orch


def test_cli_says_so_and_refuses_a_conflicting_spool(tmp_path: Path, db_url: str, suite_dir: Path) -> None:
    orch = import_cli(tmp_path, db_url, suite_dir)
    lines = echo_lines()
    lines[2] = _result(2, 0, metrics={"wall_ms": {"value": 1.0, "unit": "ms", "median": "fast"}})
    bad = orch(str(_write(tmp_path / "events.jsonl", lines)))
    assert bad.returncode == 1, bad.stdout + bad.stderr
    said = " ".join(bad.stdout.split())  # free text wraps at words to the width
    assert "partial — 2 results, 1 error stored; run partial" in said, bad.stdout
    assert "1 case failed: agent line 2 (result): metrics: metric 'wall_ms': median must be" in said
    assert "on the host" not in bad.stdout  # nothing lost: the store holds every line the agent wrote
    foreign = orch(str(_write(tmp_path / "moe.jsonl", [echo_lines(suite="moe-sweep")[0], *lines[1:]])))
    assert foreign.returncode == 2 and "Traceback" not in foreign.stderr, foreign.stderr
    assert "its hello names suite 'moe-sweep', the stored run is of suite 'echo-t'" in foreign.stderr


def _files(ci: int, out: str | None = None) -> list[dict[str, Any]]:
    import hashlib

    text = (out if out is not None else f"t={ci + 1}\n").encode()
    digest = hashlib.sha256(text).hexdigest()
    return [{"stdout": {"path": f"outputs/{ci}/0.stdout", "bytes": len(text), "sha256": digest}}]


@pytest.mark.parametrize("changed", [False, True])
def test_a_stored_line_whose_outputs_stayed_on_the_host_is_judged_by_their_digests(
    store: Store, tmp_path: Path, suite_dir: Path, changed: bool
) -> None:
    """The tester's false refusal: a spool whose results left their outputs on the host (too large for the line:
    ``outputs_complete`` false), imported on a machine that cannot reach the host after the live run had stored
    its first results, was refused as "line 2 would be an error row, the store holds an ok row there" although
    not a byte of it had changed. Now the stored lines are judged by the digests they hold of their outputs."""
    full = echo_lines()
    for seq, ci in ((2, 0), (4, 1), (6, 2)):
        out = f"t={ci + 1}\n"
        full[seq] = _result(seq, ci, info={"exit_status": 0, "parsed": "stdout", "stdout": out, "outputs": [out],
                                           "files": _files(ci)})  # fmt: skip
    _import(store, _write(tmp_path / "events.jsonl", full), suite_dir)  # as the live run stored it (outputs fetched)
    before = [(r.seq, r.status, r.metrics) for r in store.results(RUN_ID).items]
    assert [s for _, s, _ in before] == ["ok", "ok", "ok"]
    left = list(full)
    for seq, ci in ((2, 0), (4, 1), (6, 2)):  # the same lines as the agent wrote them: outputs left on the host
        files = _files(ci, "t=9\n") if changed and ci == 1 else _files(ci)
        left[seq] = _result(seq, ci, info={"exit_status": 0, "parsed": "stdout", "stdout": "t=",
                                           "outputs_complete": False, "files": files})  # fmt: skip
    path = _write(tmp_path / "copied.jsonl", left)
    if changed:
        with pytest.raises(UsageError, match="conflicts with the stored run") as info:
            _import(store, path, suite_dir)
        assert "line 4: info.files[0].stdout.sha256 is" in info.value.message, info.value.message
    else:
        out = _import(store, path, suite_dir)
        assert out.status == "completed" and out.new_lines == 0, out
    assert [(r.seq, r.status, r.metrics) for r in store.results(RUN_ID).items] == before


def _with_logs(*logs: tuple[str, str]) -> list[bytes]:
    """``echo_lines()`` with the log lines ``(level, message)`` after case 0's result (from line 3), every seq its
    position and the done line's count of lines to match."""
    lines = echo_lines()
    lines[3:3] = [_line(0, "log", level=level, message=message) for level, message in logs]
    out = []
    for pos, raw in enumerate(lines):
        doc = json.loads(raw)
        doc["seq"], doc["ts"] = pos, 1_790_000_000.0 + pos
        if doc["type"] == "done":
            doc["counts"]["lines"] = pos
        out.append(json.dumps(doc).encode())
    return out


@pytest.mark.parametrize(
    ("line_4", "says"),
    [
        (_line(4, "log", level="warning", message="rewritten"),
         "line 4: log text is '[warning] rewritten', '[warning] clocks low' stored"),  # fmt: skip
        (_line(4, "log", level="error", message="clocks low"),
         "line 4: log text is '[error] clocks low', '[warning] clocks low' stored"),  # fmt: skip
        (_line(4, "case_start", case_index=1, case=_case(1)),  # case 1 started twice: the agent's order kept
         "log: the store holds '[warning] clocks low' after line 3's log text, which no line of the spool up to "
         "line 9 writes"),  # fmt: skip
    ],
)
def test_a_spool_whose_stored_log_lines_changed_is_refused(
    store: Store, tmp_path: Path, suite_dir: Path, line_4: bytes, says: str
) -> None:
    """Issue 10, a tester's case: log lines were not compared at import (nor at resume): a spool whose log line
    at a stored position says other words (or is another line) was taken as the stored one. Now the log text the
    store keeps is compared as well: the conflict names the line and both texts, nothing is imported. A log
    line with a NUL (stored as U+2400, with orch's note in the log) is the same line on both imports."""
    first = _with_logs(("info", "warming up\x00"), ("warning", "clocks low"))
    out = _import(store, _write(tmp_path / "events.jsonl", first), suite_dir)
    assert (out.status, out.new_lines) == ("completed", 10), out
    again = _import(store, _write(tmp_path / "events.jsonl", first), suite_dir)
    assert (again.status, again.new_lines) == ("completed", 0), again
    before = [(r.seq, r.status, r.metrics) for r in store.results(RUN_ID).items]
    changed = list(first)
    changed[4] = line_4
    with pytest.raises(UsageError, match="conflicts with the stored run") as info:
        _import(store, _write(tmp_path / "other.jsonl", changed), suite_dir)
    assert says in info.value.message, info.value.message
    assert [(r.seq, r.status, r.metrics) for r in store.results(RUN_ID).items] == before
