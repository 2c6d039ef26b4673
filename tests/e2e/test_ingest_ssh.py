"""The path from a host's spool to the store over real SSH (sshd test bed), SQLite and PostgreSQL: whole lines of
any length up to the cap, seq checked against position, the agent's counts reconciled, resume after a lost host.

Spools with a given content are planted in the host's run directory (as the agent lays it out) and collected
with ``orch run --resume``: the real agent's ``follow`` streams them over SSH to the real runner and store."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.repo import Store
from orchestrator.transport.lines import MAX_LINE_BYTES
from tests.e2e.conftest import Orch
from tests.plugins.sshd import SshdHost

pytestmark = [pytest.mark.sshd]

LOUD = """\
import sys, time
time.sleep(SLEEP)
sys.stdout.write(("x" * 99 + "\\n") * (int(sys.argv[1]) // 100))
sys.stdout.write("tput: " + sys.argv[2] + "\\n")
"""

LOUD_SUITE = """\
name: loud
description: a tool printing SIZE bytes per run, then its figure
command: ["PYTHON", "SCRIPT", "{size}", "{tput}"]
params:
  size: {type: int, default: 20000, help: "bytes printed per run"}
  tput: {type: list, default: [1, 2, 3], help: "the figure printed"}
timeout_s: 60
repeat: 1
parser: {name: regex, pattern: 'tput: (?P<tput>[\\d.]+)'}
metrics:
  tput: {path: tput, unit: "1/s"}
"""


PLANTED = "planted-run"  # a hello's run id that _plant replaces with the planted run's


@pytest.fixture
def bed(one_host_any_db: tuple[Orch, SshdHost]) -> tuple[Orch, SshdHost]:
    return one_host_any_db


def _line(seq: int, type_: str, **fields: Any) -> str:
    return json.dumps({"v": 1, "seq": seq, "type": type_, "ts": 1_790_000_000.0 + seq, **fields})


def _result(seq: int, m: int, *, index: int | None = None, **info: Any) -> str:
    """Case ``m`` of the sweep (index ``m - 1`` unless ``index`` is given): a result of ``m`` ms."""
    return _line(seq, "result", case_index=m - 1 if index is None else index, case={"ms": float(m)},
                 metrics={"time_ms": {"value": float(m), "unit": "ms"}}, info=info)  # fmt: skip


def _plant(orch: Orch, host: SshdHost, lines: list[str]) -> str:
    """A run of suite noop in the store, started on ``host`` (as if orch had lost it), whose spool on the host
    holds ``lines`` (a hello's ``run_id`` of :data:`PLANTED` becomes the new run's id). Returns the run id."""
    store = Store.from_url(orch.db_url)
    try:
        store.upsert_host(host.name, address=host.address, group="ct200", labels={})
        rid = store.create_run(suite="noop", params={"sets": {}}, preset=None, label="planted", hosts=[host.name],
                               started_by="t@box", started_on="box")  # fmt: skip
        store.start_host_run(rid, host.name, facts={}, agent_version="planted", build_sha=None)
    finally:
        store.close()
    run_dir = host.home / ".orch" / "runs" / rid / host.name  # the agent keeps each host's run apart
    run_dir.mkdir(parents=True)
    with open(run_dir / "events.jsonl", "w") as f:
        for line in lines:
            f.write(line.replace(f'"run_id": "{PLANTED}"', json.dumps({"run_id": rid})[1:-1]) + "\n")
    return rid


def _spool(results: list[str], *, lines: int | None = None, errors: int = 0) -> list[str]:
    n = len(results)
    body = [_line(0, "hello", agent_version="planted", run_id=PLANTED, suite="noop", facts={}, cases_total=n), *results]
    counts = {"lines": len(body) if lines is None else lines, "results": n, "errors": errors}
    return [*body, _line(len(body), "done", status="completed", counts=counts)]


def _collect(orch: Orch, rid: str, rc: int, *extra: str) -> dict[str, Any]:
    return orch.json("run", "--resume", rid, *extra, expect_rc=rc, timeout=300)  # type: ignore[no-any-return]


def _loud_suite(tmp_path: Path, sleep_s: float = 0.0) -> Path:
    script = tmp_path / "loud.py"
    script.write_text(LOUD.replace("SLEEP", repr(sleep_s)))
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "loud.yaml").write_text(LOUD_SUITE.replace("PYTHON", sys.executable).replace("SCRIPT", str(script)))
    return suites


def test_command_suite_printing_20kb_per_run_300_times_stores_every_result(
    bed: tuple[Orch, SshdHost], tmp_path: Path
) -> None:
    """Issue 10 case 1: 3 cases x 300 runs x 20 KB; before, 0 of 3 results were stored and the run said completed."""
    orch, _ = bed
    suites = _loud_suite(tmp_path)
    doc = orch.json("run", "loud", "--hosts", "ct200", "--repeat", "300", "--suite-dir", str(suites), timeout=600)
    assert doc["status"] == "completed", doc
    assert [(h["host"], h["status"], h["results"], h["errors"]) for h in doc["hosts"]] == [
        ("gpu-a", "completed", 3, 0)
    ]
    store = Store.from_url(orch.db_url)
    rows = store.results(doc["run_id"], limit=10).items
    assert sorted(r.metrics["tput"]["value"] for r in rows) == [1.0, 2.0, 3.0]
    assert all(r.status == "ok" for r in rows)
    rec = store.get_run(doc["run_id"]).host_run("gpu-a")
    assert rec is not None and rec.done_counts is not None and rec.done_counts["results"] == 3
    store.close()


def test_a_valid_50_mb_line_is_stored_whole(bed: tuple[Orch, SshdHost]) -> None:
    orch, host = bed
    big = "y" * 50_000_000
    rid = _plant(orch, host, _spool([_result(1, 1), _result(2, 2, blob=big), _result(3, 3)]))
    doc = _collect(orch, rid, 0)
    assert doc["status"] == "completed" and doc["hosts"][0]["results"] == 3, doc
    store = Store.from_url(orch.db_url)
    rows = {r.seq: r for r in store.results(rid, limit=10).items}
    assert sorted(rows) == [1, 2, 3] and all(r.status == "ok" for r in rows.values())
    assert rows[2].info is not None and rows[2].info["blob"] == big
    store.close()


def test_a_line_past_the_cap_is_exactly_one_error_row_and_the_run_is_not_completed(
    bed: tuple[Orch, SshdHost],
) -> None:
    orch, host = bed
    size_before = len(_result(2, 2, blob=""))
    huge = _result(2, 2, blob="z" * (MAX_LINE_BYTES + 1 - size_before))
    assert len(huge) == MAX_LINE_BYTES + 1
    rid = _plant(orch, host, _spool([_result(1, 1), huge, _result(3, 3)]))
    doc = _collect(orch, rid, 1)
    assert doc["status"] == "partial" and doc["hosts"][0]["status"] == "failed", doc
    assert (doc["hosts"][0]["results"], doc["hosts"][0]["errors"]) == (2, 1)
    assert "3 results on the host, 2 stored" in doc["hosts"][0]["error"]
    # the count's difference comes with its cause: the error row of the line past the cap
    said = f"; the first error row: agent line 2 (claiming seq 2) is {MAX_LINE_BYTES + 1:,} bytes, over orch's cap"
    assert said in doc["hosts"][0]["error"], doc["hosts"][0]["error"]
    store = Store.from_url(orch.db_url)
    rows = store.results(rid, limit=10).items
    assert [(r.seq, r.status) for r in rows] == [(1, "ok"), (2, "error"), (3, "ok")]
    err = rows[1].error or ""
    assert f"agent line 2 (claiming seq 2) is {MAX_LINE_BYTES + 1:,} bytes, over orch's cap" in err
    store.close()


@pytest.mark.parametrize(("claimed", "what"), [(100_004, "a jump"), (2, "a duplicate"), (5, "a gap")])
def test_a_seq_that_is_not_the_position_is_one_error_row_and_the_run_is_not_completed(
    bed: tuple[Orch, SshdHost], claimed: int, what: str
) -> None:
    """Issue 10 case 2: the line at position 3 claims another seq; before, last_seq jumped and the run said
    completed with 1 of 6 results stored (a jump), or dropped the line without a trace (a duplicate)."""
    orch, host = bed
    results = [_result(i, i) for i in range(1, 7)]
    results[2] = results[2].replace('"seq": 3,', f'"seq": {claimed},')
    rid = _plant(orch, host, _spool(results))
    doc = _collect(orch, rid, 1)
    h = doc["hosts"][0]
    assert doc["status"] == "partial" and h["status"] == "failed", (what, doc)
    assert (h["results"], h["errors"]) == (5, 1) and "6 results on the host, 5 stored" in h["error"]
    store = Store.from_url(orch.db_url)
    rows = store.results(rid, limit=20).items
    assert [(r.seq, r.status) for r in rows] == [(1, "ok"), (2, "ok"), (3, "error"), (4, "ok"), (5, "ok"), (6, "ok")]
    assert f"agent line 3 (result) claims seq {claimed}" in (rows[2].error or "")
    assert rows[2].case == {"ms": 3.0}
    detail = store.get_run(rid)
    assert detail.host_runs[0].last_seq == 7 and (detail.results, detail.errors) == (5, 1)
    store.close()
    again = _collect_twice_is_idempotent(orch, rid)
    assert again == (5, 1)


def _collect_twice_is_idempotent(orch: Orch, rid: str) -> tuple[int, int]:
    res = orch("run", "--resume", rid)
    assert res.returncode == 2 and "nothing to resume" in res.stderr, res.stderr
    store = Store.from_url(orch.db_url)
    try:
        d = store.get_run(rid)
        return d.results, d.errors
    finally:
        store.close()


def test_counts_that_disagree_with_the_spool_fail_the_host(bed: tuple[Orch, SshdHost]) -> None:
    """The agent says it wrote 9 lines and 4 results; the spool holds 5 lines and 3: nothing is `completed`."""
    orch, host = bed
    spool = _spool([_result(1, 1), _result(2, 2), _result(3, 3)], lines=9)
    spool[-1] = spool[-1].replace('"results": 3', '"results": 4')
    rid = _plant(orch, host, spool)
    h = _collect(orch, rid, 1)["hosts"][0]
    assert h["status"] == "failed" and h["results"] == 3
    assert "9 lines on the host before done, 4 stored; 4 results on the host, 3 stored" in h["error"]


COVERAGE = {
    # cases_total, the cases whose result lines the spool holds (in order), what the host's error says
    "a case skipped": (3, [0, 2], "the agent's hello announced 3 cases: no result or error stored for 1 case (1)"),
    "no case at all": (2, [], "the agent's hello announced 2 cases: no result or error stored for 2 cases (0, 1)"),
    "a case the run lacks": (2, [0, 1, 7], "rows stored for 1 case the run does not have (7)"),
    "ten missing": (12, [0, 11], "no result or error stored for 10 cases (1, 2, 3, 4, 5, 6, 7, 8 and 2 more)"),
}


@pytest.mark.parametrize("shape", COVERAGE)
def test_counts_that_agree_cannot_hide_a_case_without_its_outcome(bed: tuple[Orch, SshdHost], shape: str) -> None:
    """The agent writes one result or error per case of its hello's ``cases_total``. A spool whose done counts
    agree with its lines but which lacks a case (or holds one the run does not have) ended ``completed``: "every
    line the agent wrote is stored" held, and yet a case had no number. Now the stored rows must give each case
    its one outcome, or the host fails naming the cases."""
    orch, host = bed
    total, cases, said = COVERAGE[shape]
    body = [_line(0, "hello", agent_version="planted", run_id=PLANTED, suite="noop", facts={}, cases_total=total)]
    for m in cases:
        body.append(_line(len(body), "case_start", case_index=m, case={"ms": float(m)}))
        body.append(_result(len(body), m, index=m))
    counts = {"lines": len(body), "results": len(cases), "errors": 0}
    rid = _plant(orch, host, [*body, _line(len(body), "done", status="completed", counts=counts)])
    doc = _collect(orch, rid, 1)
    [h] = doc["hosts"]
    assert doc["status"] != "completed" and h["status"] == "failed" and h["results"] == len(cases), doc
    assert said in h["error"] and "(the store does not hold one outcome per case)" in h["error"], h


@pytest.mark.timeout(900)
def test_resume_after_the_host_was_lost_collects_its_remaining_cases(
    bed: tuple[Orch, SshdHost], tmp_path: Path
) -> None:
    """Issue 10 case 4: sshd killed mid-run -> partial with a hint to --resume, which then collected nothing
    ("already finished"). Now it reattaches and the run ends completed with every case exactly once."""
    orch, host = bed
    suites = _loud_suite(tmp_path, sleep_s=1.0)
    proc = orch.popen("run", "loud", "--hosts", "gpu-a", "--set", "tput=1..32", "--suite-dir", str(suites), "--json")
    store = Store.from_url(orch.db_url)
    deadline = time.monotonic() + 240
    rid = None
    while time.monotonic() < deadline and proc.poll() is None:
        runs = store.list_runs(limit=1).items if _has_runs(store) else []
        if runs and runs[0].results >= 1:
            rid = runs[0].id
            break
        time.sleep(0.2)
    assert rid is not None, "the run produced no result to interrupt"
    host.kill_sessions()
    host.stop()  # the host is unreachable: reconnects fail until orch gives the host up
    out, err = proc.communicate(timeout=300)
    first = json.loads(out)
    assert proc.returncode == 1 and first["status"] == "partial", (first, err[-2000:])
    h = first["hosts"][0]
    assert h["status"] == "failed" and "lost the connection" in h["error"] and h["results"] < 6, first
    # a resume while the host is still down fails too: its own reason is the error now, the first is history
    down = orch("run", "--resume", rid, "--suite-dir", str(suites), "--json", timeout=300)
    assert down.returncode == 1, down.stderr[-2000:]
    h = json.loads(down.stdout)["hosts"][0]
    assert h["status"] == "failed" and "refused" in h["error"] and "lost the connection" not in h["error"], h
    was = next(x for x in orch.json("runs", "show", rid)["hosts"] if x["host"] == "gpu-a")
    assert [e["error"][:30] for e in was["earlier_errors"]] == [first["hosts"][0]["error"][:30]], was
    host.start()
    doc = _collect(orch, rid, 0, "--suite-dir", str(suites))
    assert doc["status"] == "completed" and doc["hosts"][0]["results"] == 6, doc
    figures = sorted(r.metrics["tput"]["value"] for r in store.results(rid, limit=100).items)
    assert figures == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]  # every case exactly once
    rec = store.get_run(rid).host_run("gpu-a")
    assert rec is not None and rec.status == "completed" and rec.done_counts is not None
    assert store.get_run(rid).status == "completed"
    store.close()
    # the error is the reason for the host's current status only: a completed host has none; the dropped
    # attempt stays visible as history (runs show --json and the API carry the same host run record)
    shown = orch.json("runs", "show", rid)
    h = next(x for x in shown["hosts"] if x["host"] == "gpu-a")
    assert h["status"] == "completed" and h["error"] is None, h
    earlier = h["earlier_errors"]  # oldest first: the drop, then the resume that found the host down
    assert [e["status"] for e in earlier] == ["failed", "failed"], h
    assert "lost the connection" in earlier[0]["error"] and "refused" in earlier[1]["error"], h
    text = orch("runs", "show", rid, columns=400)
    assert text.returncode == 0 and "gpu-a: earlier attempt failed: lost the connection" in text.stdout, text
    from fastapi.testclient import TestClient

    from orchestrator.api.app import create_app
    from orchestrator.settings import Settings

    with TestClient(create_app(Settings(db_url=orch.db_url, inventory=orch.inventory))) as client:
        r = client.get(f"/api/v1/runs/{rid}")
        assert r.status_code == 200, r.text
        (api,) = r.json()["host_runs"]
        assert api["status"] == "completed" and api["error"] is None, api
        assert [e["status"] for e in api["earlier_errors"]] == ["failed", "failed"], api
        assert "lost the connection" in api["earlier_errors"][0]["error"], api


def test_resume_says_per_host_when_the_spool_is_gone(bed: tuple[Orch, SshdHost]) -> None:
    orch, host = bed
    spool = _spool([_result(1, 1), _result(2, 2)])
    rid = _plant(orch, host, spool[:2])  # hello and one result, then the host was lost
    shutil.rmtree(host.home / ".orch" / "runs" / rid)
    doc = _collect(orch, rid, 1)
    h = doc["hosts"][0]
    spool_text = f"the run's spool ~/.orch/runs/{rid}/{host.name}/events.jsonl is gone from the host (moved or deleted"
    assert h["status"] == "failed" and spool_text in h["error"] and "OOM" not in h["hint"], doc


def test_resume_of_a_run_whose_spool_was_moved_names_it_not_the_oom_killer(bed: tuple[Orch, SshdHost]) -> None:
    """Only events.jsonl moved away (the run directory, its spec and the dead worker's pid are left): before, the
    agent's follow found no spool and a dead worker and orch blamed a kill from outside (the OOM killer)."""
    orch, host = bed
    rid = _plant(orch, host, _spool([_result(1, 1), _result(2, 2)]))
    run_dir = host.home / ".orch" / "runs" / rid / host.name
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid that names no live worker (the agent also checks the worker's command line)
    (run_dir / "pid").write_text(f"{gone.pid}\n")
    (run_dir / "events.jsonl").rename(run_dir / "events.jsonl.moved")
    doc = _collect(orch, rid, 1)
    h = doc["hosts"][0]
    assert h["status"] == "failed", doc
    assert f"the run's spool {run_dir / 'events.jsonl'} is gone from the host (moved or deleted)" in h["error"], h
    assert "OOM" not in h["error"] + h["hint"] and "orch runs import" in h["hint"], h


def _has_runs(store: Store) -> bool:
    try:
        return store.list_runs(limit=1).total > 0
    except Exception:  # noqa: BLE001 - the run has not created the schema yet
        return False


def test_a_line_orch_would_have_to_change_is_one_error_row_over_ssh(bed: tuple[Orch, SshdHost]) -> None:
    """A tester's crafted spool (issue 10's kind): a metric statistic that is a string and a result for another
    case than the one started, collected live over SSH: each one error row, never stored with the metric dropped
    or under the case it claims; the run is not completed."""
    orch, host = bed
    body = []
    for ci in range(3):
        body += [_line(1 + 2 * ci, "case_start", case_index=ci, case={"ms": float(ci)}),
                 _result(2 + 2 * ci, ci, index=ci)]  # fmt: skip
    body[1] = body[1].replace('"time_ms": {"value": 0.0, "unit": "ms"}', '"time_ms": {"value": 0.0, "unit": "ms", '
                              '"median": "fast"}')  # fmt: skip
    body[3] = _result(4, 2, index=2)  # right after the case_start of case 1
    spool = _spool(body)
    spool[-1] = spool[-1].replace('"results": 6', '"results": 3')
    rid = _plant(orch, host, spool)
    h = _collect(orch, rid, 1)["hosts"][0]
    assert (h["status"], h["results"], h["errors"]) == ("failed", 1, 3), h
    # the refused metric is the agent's own result (counted so: protocol.JUDGED_KEY); the foreign case's is not;
    # case 1 started and no line for it came: orch's row at the done line names it, on no side of the counts
    assert h["error"].startswith("case 1 (started at line 3) has no result or error before the done line (line 7)")
    assert "3 results on the host, 2 stored; 0 errors on the host, 1 stored" in h["error"]
    store = Store.from_url(orch.db_url)
    try:
        rows = store.results(rid, limit=20).items
        assert [(r.seq, r.case_index, r.status) for r in rows] == [(2, 0, "error"), (4, 2, "error"), (6, 2, "ok"),
                                                                   (7, 1, "error")]  # fmt: skip
        assert "metric 'time_ms': median must be a finite number, got 'fast'" in (rows[0].error or "")
        assert "it is for case 2, but the case started last is case 1" in (rows[1].error or "")
        assert store.get_run(rid).status == "partial"
    finally:
        store.close()


def test_lines_whose_ts_is_out_of_range_are_error_rows_over_ssh(bed: tuple[Orch, SshdHost]) -> None:
    """Issue 10 (F5) on the live path: a result line dated year 5138 (ts 1e11) was stored as measured then, and a
    hello past year 9999 (ts 1e300) crashed the import; collected over SSH, each is one error row at its position
    naming the accepted range, and the run is not completed."""
    orch, host = bed
    spool = _spool([_result(1, 1), _result(2, 2), _result(3, 3)])
    spool[0] = spool[0].replace('"ts": 1790000000.0', '"ts": 1e300')
    spool[2] = spool[2].replace('"ts": 1790000002.0', '"ts": 1e11')
    assert "1e300" in spool[0] and "1e11" in spool[2]
    rid = _plant(orch, host, spool)
    h = _collect(orch, rid, 1)["hosts"][0]
    assert (h["status"], h["results"], h["errors"]) == ("failed", 2, 2), h
    assert "3 results on the host, 2 stored" in h["error"]
    store = Store.from_url(orch.db_url)
    try:
        rows = store.results(rid, limit=20).items
        assert [(r.seq, r.status) for r in rows] == [(0, "error"), (1, "ok"), (2, "error"), (3, "ok")]
        for row, typ, ts in ((rows[0], "hello", "1e+300 (outside the years 1-9999)"),
                             (rows[2], "result", "100000000000.0 (5138-11-16 09:46:40 UTC)")):  # fmt: skip
            assert (row.error or "").startswith(f"agent line {row.seq} ({typ}): ts {ts} is outside the accepted "
                                                "range of ts, unix seconds from 946684800 (2000-01-01"), row.error
        assert store.get_run(rid).status == "partial"
    finally:
        store.close()
