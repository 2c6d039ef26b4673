"""``orch runs import``: a copied spool through the live ingest path, on SQLite and PostgreSQL — idempotent, the
same seq-as-position checks and reconciliation, clear errors for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.errors import UsageError
from orchestrator.spool_import import import_spool
from orchestrator.store.repo import Store
from orchestrator.suites.registry import builtin_registry

RUN_ID = "01a2aaaa-0000-7000-8000-000000000001"


def _line(seq: int, type_: str, **fields: Any) -> str:
    return json.dumps({"v": 1, "seq": seq, "type": type_, "ts": 1_790_000_000.0 + seq, **fields})


def _spool(path: Path, n: int = 4, *, done: bool = True, tweak: dict[int, str] | None = None) -> Path:
    lines = [_line(0, "hello", agent_version="a" * 64, run_id=RUN_ID, suite="noop", facts={}, cases_total=n)]
    for i in range(1, n + 1):
        lines.append(_line(i, "result", case_index=i - 1, case={"ms": float(i)},
                           metrics={"time_ms": {"value": float(i), "unit": "ms"}}))  # fmt: skip
    for pos, text in (tweak or {}).items():
        lines[pos] = text
    if done:
        lines.append(_line(len(lines), "done", status="completed",
                           counts={"lines": len(lines), "results": n, "errors": 0}))  # fmt: skip
    path.write_text("".join(line + "\n" for line in lines))
    return path


def _import(store: Store, path: Path, **kw: Any) -> Any:
    return import_spool(store, path, host=kw.pop("host", "node-7"), registry=builtin_registry(), **kw)


def test_import_creates_the_run_and_a_second_import_stores_nothing(store: Store, tmp_path: Path) -> None:
    spool = _spool(tmp_path / "events.jsonl")
    first = _import(store, spool)
    assert (first.run_id, first.created_run, first.lines, first.new_lines) == (RUN_ID, True, 6, 6)
    assert (first.status, first.run_status, first.results, first.errors) == ("completed", "completed", 4, 0)
    again = _import(store, spool)
    assert (again.created_run, again.new_lines, again.results, again.status) == (False, 0, 4, "completed")
    assert store.results(RUN_ID).total == 4
    detail = store.get_run(RUN_ID)
    assert detail.status == "completed" and detail.hosts == ["node-7"]
    assert detail.host_run("node-7").error is None  # type: ignore[union-attr]


def test_an_imported_run_started_when_its_agent_did_with_the_spec_s_preset(store: Store, tmp_path: Path) -> None:
    # the new-user trial: a run imported into a store that never saw it said "started <import time>",
    # "asked: defaults", "preset: none" — none of it true of the run
    from orchestrator.cli.asked import asked_line

    spool = _spool(tmp_path / "events.jsonl")
    (tmp_path / "spec.json").write_text(json.dumps({"run_id": RUN_ID, "suite": "noop", "preset": "tiny"}))
    _import(store, spool)
    detail = store.get_run(RUN_ID)
    assert detail.started_at.timestamp() == 1_790_000_000.0  # the hello's ts, not the import's
    assert detail.preset == "tiny"
    assert asked_line(detail.params) == f"asked: unknown (imported from {spool})"
    other = tmp_path / "b"
    other.mkdir()
    (other / "spec.json").write_text("not json")
    _import(store, _spool(other / "events.jsonl"), host="node-8")  # a second host's spool: the run is kept as is
    assert store.get_run(RUN_ID).preset == "tiny"


def test_a_line_after_the_done_line_fails_the_host_and_says_so_in_the_store(store: Store, tmp_path: Path) -> None:
    # the variant tester: a result after done was dropped, the run stored `completed` and no trace kept
    spool = _spool(tmp_path / "events.jsonl")
    extra = _line(6, "result", case_index=4, case={"ms": 5.0}, metrics={"time_ms": {"value": 5.0, "unit": "ms"}})
    with open(spool, "a") as f:
        f.write(extra + "\n" + _line(7, "done", status="completed", counts={"lines": 7, "results": 5}) + "\n")
    out = _import(store, spool)
    assert (out.status, out.run_status, out.results) == ("failed", "partial", 4)
    want = "2 lines after the done line (line 5) were not stored: the agent writes nothing after done"
    assert want in (out.error or "")
    hr = store.get_run(RUN_ID).host_run("node-7")
    assert hr is not None and hr.status == "failed" and want in (hr.error or "")
    again = _import(store, spool)  # idempotent: the same verdict, nothing stored twice
    assert (again.status, again.new_lines, store.results(RUN_ID).total) == ("failed", 0, 4)


def test_import_completes_a_run_whose_host_was_lost_mid_run(store: Store, tmp_path: Path) -> None:
    """The live run stored 2 lines and lost the host (partial); the spool copied off it later brings the rest."""
    spool = _spool(tmp_path / "events.jsonl")
    full = spool.read_text().splitlines(keepends=True)
    (tmp_path / "early.jsonl").write_text("".join(full[:2]))
    early = _import(store, tmp_path / "early.jsonl")
    assert (early.status, early.results, early.new_lines) == ("unfinished", 1, 2)
    assert "no done line" in (early.error or "")
    store.finish_host_run(RUN_ID, "node-7", "failed", "lost the connection")
    store.finish_run(RUN_ID, "partial")
    rest = _import(store, spool)  # the run's only host: --host not needed
    assert (rest.new_lines, rest.results, rest.status, rest.run_status) == (4, 4, "completed", "completed")
    assert [r.seq for r in store.results(RUN_ID).items] == [1, 2, 3, 4]


def test_a_line_claiming_another_seq_is_one_error_row_and_the_host_fails(store: Store, tmp_path: Path) -> None:
    dup = _line(2, "result", case_index=2, case={"ms": 3.0}, metrics={"time_ms": {"value": 3.0, "unit": "ms"}})
    out = _import(store, _spool(tmp_path / "events.jsonl", tweak={3: dup}))
    assert (out.status, out.run_status, out.results, out.errors) == ("failed", "partial", 3, 1)
    assert "4 results on the host, 3 stored; 0 errors on the host, 1 stored" in (out.error or "")
    rows = store.results(RUN_ID).items
    assert [(r.seq, r.status) for r in rows] == [(1, "ok"), (2, "ok"), (3, "error"), (4, "ok")]
    assert "agent line 3 (result) claims seq 2" in (rows[2].error or "")


def test_a_line_past_the_cap_is_one_error_row(store: Store, tmp_path: Path) -> None:
    big = _line(2, "result", case_index=1, case={"ms": 2.0}, metrics={"time_ms": {"value": 2.0, "unit": "ms"}},
                info={"blob": "b" * 5000})  # fmt: skip
    out = _import(store, _spool(tmp_path / "events.jsonl", tweak={2: big}), cap=4096)
    assert (out.status, out.results, out.errors) == ("failed", 3, 1)
    [err] = store.results(RUN_ID, status="error").items
    assert err.seq == 2 and f"agent line 2 (claiming seq 2) is {len(big):,} bytes" in (err.error or "")


def test_a_spool_ending_in_half_a_line_leaves_it_out_and_says_so(store: Store, tmp_path: Path) -> None:
    spool = _spool(tmp_path / "events.jsonl", done=False)
    with open(spool, "a") as f:
        f.write('{"v":1,"seq":5,"type":"res')
    out = _import(store, spool)
    assert (out.status, out.lines, out.results, out.errors) == ("unfinished", 5, 4, 0)
    assert (out.error or "").startswith("the last line (26 bytes) has no newline: the spool was copied while")


def test_bad_input_is_a_usage_error_naming_the_place(store: Store, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no spool file at"):
        _import(store, tmp_path / "missing.jsonl")
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(UsageError, match=r"notes.txt:1: not an orch agent spool"):
        _import(store, tmp_path / "notes.txt")
    with pytest.raises(UsageError, match="which host wrote"):
        _import(store, _spool(tmp_path / "events.jsonl"), host=None)
    _import(store, tmp_path / "events.jsonl")
    assert _import(store, tmp_path / "events.jsonl", host="other").created_run is False  # a second host of the run
    with pytest.raises(UsageError, match="which host wrote .* run has hosts node-7, other"):
        _import(store, tmp_path / "events.jsonl", host=None)  # no longer the run's only host: say which


def test_cli_exit_codes_and_json(tmp_path: Path, db_url: str) -> None:
    def orch(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "orchestrator", "--db", db_url, "--inventory",
                               str(tmp_path / "none.yaml"), "runs", "import", *args],
                              capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip

    spool = _spool(tmp_path / "events.jsonl")
    if db_url.startswith("postgresql"):
        s = Store.from_url(db_url)
        s.upgrade()
        s.close()
    ok = orch(str(spool), "--host", "node-7", "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["results"] == 4
    again = orch(str(spool))
    assert again.returncode == 0 and "6 lines, 0 newly stored" in again.stdout, again.stdout
    bad = orch(str(tmp_path / "missing.jsonl"))
    assert bad.returncode == 2 and "no spool file at" in bad.stderr and "Traceback" not in bad.stderr


def test_an_imported_host_run_started_and_ended_when_its_agent_did(store: Store, tmp_path: Path) -> None:
    # the variant tester: into a fresh store, the host run's started_at was the import's time and its finished_at
    # too, while the run's started_at was the hello's ts: a host run that started months after its run
    spool = _spool(tmp_path / "events.jsonl")  # hello ts 1_790_000_000, done (line 5) ts 1_790_000_005
    _import(store, spool)
    detail = store.get_run(RUN_ID)
    rec = detail.host_run("node-7")
    assert rec is not None and rec.started_at is not None and rec.finished_at is not None
    assert (rec.started_at.timestamp(), rec.finished_at.timestamp()) == (1_790_000_000.0, 1_790_000_005.0)
    assert detail.finished_at is not None and detail.finished_at.timestamp() == 1_790_000_005.0


def test_an_imported_run_never_starts_in_the_future_nor_after_its_first_host(store: Store, tmp_path: Path) -> None:
    # the variant tester: a hello 12 h ahead (a host clock ahead, within what the protocol takes) stored a run that
    # started after it finished; a second host whose hello was earlier than the first's left the run starting late
    import time

    ahead = time.time() + 12 * 3600
    spool = tmp_path / "a" / "events.jsonl"
    spool.parent.mkdir()
    lines = [json.dumps({"v": 1, "seq": 0, "type": "hello", "ts": ahead, "agent_version": "a" * 64,
                         "run_id": RUN_ID, "suite": "noop", "facts": {}, "cases_total": 0}),
             json.dumps({"v": 1, "seq": 1, "type": "done", "ts": ahead + 1, "status": "completed",
                         "counts": {"lines": 2, "results": 0, "errors": 0}})]  # fmt: skip
    spool.write_text("".join(line + "\n" for line in lines))
    before = time.time()
    _import(store, spool, host="node-a")
    detail = store.get_run(RUN_ID)
    assert detail.finished_at is not None and detail.started_at <= detail.finished_at, detail
    assert before - 1 <= detail.started_at.timestamp() <= time.time() + 1
    _import(store, _spool(tmp_path / "events.jsonl"), host="node-b")  # hello at 1_790_000_000
    assert store.get_run(RUN_ID).started_at.timestamp() == 1_790_000_000.0
