"""``orch run --resume`` never takes a spool that was replaced or rewritten on the host (issue 10), over real sshd,
on SQLite and PostgreSQL: orch dies once one result is stored, the agent finishes on the host, then the spool is
changed there before the resume. The resume re-reads the stored lines and compares them with the store (the
comparison ``orch runs import`` makes, ``orchestrator/spool_check.py``): a spool of another run, or one whose
stored lines say other figures, fails the host naming it, stores nothing of it, and the run is not completed."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.e2e.killed_run import killed_after_first_result, wait_first_result
from tests.plugins.timing import scaled, wait_for

pytestmark = [pytest.mark.sshd]

# The tester's suite: cases sleeping 0, 6 and 7 s, each printing `v: 1` — the first result is stored 6 s before the
# second, which leaves time to kill orch between them.
SLOW_SUITE = """\
name: slow
description: three cases sleeping 0, 6 and 7 s
command: ["/bin/sh", "-c", "sleep $1; echo 'v: 1'", "sh", "{s}"]
params:
  s: {type: list, default: [0, 6, 7], help: "seconds to sleep"}
parser: {name: regex, pattern: 'v: (?P<v>[0-9]+)'}
metrics:
  v: {path: v, unit: count}
"""


def _lines(spool: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in spool.read_text().splitlines() if x.strip()]


def _done(spool: Path) -> bool:
    return spool.is_file() and any(doc.get("type") == "done" for doc in _lines(spool))


def _killed_run(orch: Orch, host: Any, suites: Path, store: Store) -> tuple[str, Path]:
    """A run of ``slow`` whose orch was SIGKILLed once one result was stored, its agent left to finish: the run
    id and the host's spool (with its done line)."""
    run_id = killed_after_first_result(orch, store, "slow", "--hosts", "gpu-a", "--suite-dir", str(suites),
                                       "--timeout", str(scaled(30)))  # fmt: skip
    spool = host.home / ".orch" / "runs" / run_id / "gpu-a" / "events.jsonl"
    wait_for(lambda: _done(spool), timeout_s=120, what="the agent's done line on the host")
    return run_id, spool


def _stored(store: Store, run_id: str) -> list[tuple[int, str, dict[str, Any], Any]]:
    return [(r.seq, r.status, r.case, r.metrics["wall_ms"]["value"] if r.status == "ok" else None)
            for r in store.results(run_id, limit=100).items]  # fmt: skip


@pytest.fixture
def slow_run(one_host_any_db: tuple[Orch, Any], tmp_path: Path) -> Any:
    orch, host = one_host_any_db
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "slow.yaml").write_text(SLOW_SUITE)
    store = Store.from_url(orch.db_url)
    run_id, spool = _killed_run(orch, host, suites, store)
    before = store.get_run(run_id)
    assert before.status == "running" and 1 <= before.results < 3, before
    yield orch, host, suites, store, run_id, spool
    store.close()


def _resume(orch: Orch, run_id: str, suites: Path) -> tuple[int, dict[str, Any], str]:
    res = orch("run", "--resume", run_id, "--suite-dir", str(suites), "--timeout", str(scaled(30)), "--json",
               timeout=scaled(240))  # fmt: skip
    assert "Traceback" not in res.stderr, res.stderr
    return res.returncode, json.loads(res.stdout), res.stderr


def test_resume_refuses_another_runs_spool_copied_over_this_ones(slow_run: Any) -> None:
    """Tester's A: another finished run's ``events.jsonl`` (its hello names another run id) copied over this run's
    spool; the resume ended ``completed``, exit 0, with results of the other run."""
    orch, _host, suites, store, run_id, spool = slow_run
    other = orch.json("run", "slow", "--hosts", "gpu-a", "--suite-dir", str(suites), "--set", "s=0,1,2",
                      timeout=scaled(240))  # fmt: skip
    assert other["status"] == "completed", other
    other_spool = spool.parents[2] / other["run_id"] / "gpu-a" / "events.jsonl"
    before, last_seq = _stored(store, run_id), store.last_seq(run_id, "gpu-a")
    shutil.copyfile(other_spool, spool)

    rc, doc, err = _resume(orch, run_id, suites)

    assert rc == 1, err
    assert doc["status"] != "completed" and [h["status"] for h in doc["hosts"]] == ["failed"], doc
    hr = store.get_run(run_id).host_run("gpu-a")
    assert hr is not None and hr.status == "failed"
    assert f"the spool ~/.orch/runs/{run_id}/gpu-a/events.jsonl holds run {other['run_id']}" in (hr.error or "")
    assert "it was replaced on the host; nothing of it was stored" in (hr.error or ""), hr.error
    assert (_stored(store, run_id), store.last_seq(run_id, "gpu-a")) == (before, last_seq)
    assert store.get_run(run_id).status != "completed"


@pytest.mark.parametrize(("field", "new"), [("value", 123456.0), ("unit", "s")])
def test_resume_refuses_a_spool_whose_stored_lines_were_rewritten(slow_run: Any, field: str, new: Any) -> None:
    """Tester's B: ``wall_ms`` rewritten to 123456 in every result line, the stored ones included; the resume
    ended ``completed``, exit 0, showing 123,456 ms, while ``orch runs import`` refused the same file. Now both
    name the same conflict (one comparison), and nothing of the changed spool is stored. The unit rewritten (ms
    to s: the same figure, a thousand times the time) was not compared at all."""
    orch, _host, suites, store, run_id, spool = slow_run
    before, last_seq = _stored(store, run_id), store.last_seq(run_id, "gpu-a")
    docs = _lines(spool)
    for doc in docs:
        if doc.get("type") == "result":
            doc["metrics"]["wall_ms"][field] = new
    spool.write_text("".join(json.dumps(doc) + "\n" for doc in docs))
    seq, _, _, stored_ms = next(row for row in before if row[1] == "ok")
    stored = stored_ms if field == "value" else "ms"
    conflict = f"line {seq}: metric wall_ms.{field} is {new!r}, {stored!r} stored"

    rc, doc, err = _resume(orch, run_id, suites)

    assert rc == 1, err
    assert doc["status"] != "completed" and [h["status"] for h in doc["hosts"]] == ["failed"], doc
    hr = store.get_run(run_id).host_run("gpu-a")
    assert hr is not None and hr.status == "failed"
    assert f"the spool ~/.orch/runs/{run_id}/gpu-a/events.jsonl conflicts with the stored run {run_id}: " in (
        hr.error or ""
    ), hr.error
    assert conflict in (hr.error or ""), hr.error
    assert (_stored(store, run_id), store.last_seq(run_id, "gpu-a")) == (before, last_seq)
    assert store.get_run(run_id).status != "completed"

    res = orch("runs", "import", str(spool), "--suite-dir", str(suites), timeout=scaled(120))
    assert res.returncode == 2 and conflict in res.stderr, res.stdout + res.stderr
    assert _stored(store, run_id) == before


def _refused(slow_run: Any, docs: list[dict[str, Any]], conflict: str, before: Any, last_seq: int) -> None:
    """Write ``docs`` as the host's spool, resume, and check that the resume and ``orch runs import`` both refuse
    it naming ``conflict``, the host ``failed``, nothing of it stored, the run not completed."""
    orch, _host, suites, store, run_id, spool = slow_run
    spool.write_text("".join(json.dumps(d) + "\n" for d in docs))

    rc, out, err = _resume(orch, run_id, suites)

    assert rc == 1, err
    assert out["status"] != "completed" and [h["status"] for h in out["hosts"]] == ["failed"], out
    hr = store.get_run(run_id).host_run("gpu-a")
    assert hr is not None and hr.status == "failed"
    assert f"conflicts with the stored run {run_id}: {conflict}" in (hr.error or ""), hr.error
    assert (_stored(store, run_id), store.last_seq(run_id, "gpu-a")) == (before, last_seq)
    assert store.get_run(run_id).status != "completed"

    res = orch("runs", "import", str(spool), "--suite-dir", str(suites), timeout=scaled(120))
    assert res.returncode == 2 and conflict in res.stderr, res.stdout + res.stderr
    assert _stored(store, run_id) == before


@pytest.mark.parametrize("field", ["samples", "ts", "info"])
def test_resume_compares_the_samples_ts_and_info_of_stored_lines(slow_run: Any, field: str) -> None:
    """Testers' finding: of a stored line only the metric figures were compared, so a spool whose raw samples,
    ``ts`` or agent ``info`` were rewritten after orch stored them was taken by the resume. Now each is a
    conflict named by line and field, on resume and import alike, and nothing of the spool is stored."""
    _orch, _host, _suites, store, run_id, spool = slow_run
    before, last_seq = _stored(store, run_id), store.last_seq(run_id, "gpu-a")
    docs = _lines(spool)
    seq = next(row[0] for row in before if row[1] == "ok")
    doc = docs[seq]
    if field == "samples":
        old = doc["metrics"]["wall_ms"]["samples"][0]
        doc["metrics"]["wall_ms"]["samples"][0] = 123456.0
        conflict = f"line {seq}: metric wall_ms.samples[0] is 123456.0, {old!r} stored"
    elif field == "ts":
        old = doc["ts"]
        doc["ts"] = old + 3600.5
        conflict = f"line {seq}: ts is {old + 3600.5!r}, {old!r} stored"
    else:
        old = doc["info"]["exit_status"]
        doc["info"]["exit_status"] = 3
        conflict = f"line {seq}: info.exit_status is 3, {old!r} stored"
    _refused(slow_run, docs, conflict, before, last_seq)


def _swap_hello(hello: dict[str, Any], field: str) -> str:
    """Rewrite one field of the hello in place, keeping its run and host; returns the conflict the resume must
    name."""
    if field == "agent_version":
        old = hello["agent_version"]
        hello["agent_version"] = "f" * 64
        return f"its hello names agent ffffffffffff, the stored host run agent {old[:12]}"
    if field == "cases_total":
        hello["cases_total"] = 5
        return "its hello announces 5 cases, the stored host run 3 cases"
    old = hello["facts"]["hostname"]
    hello["facts"]["hostname"] = "other-node"
    return f"host fact hostname is 'other-node' in the spool, {old!r} stored for gpu-a"


@pytest.mark.parametrize("field", ["agent_version", "cases_total", "hostname"])
def test_resume_refuses_a_spool_whose_hello_was_swapped_keeping_run_and_host(slow_run: Any, field: str) -> None:
    """Tester's finding: a hello rewritten to another agent version, case count or machine (the run id and host
    name kept) was taken by the resume, which went on to store the rest of the spool as this host's, while
    ``orch runs import`` refused the same file. Now the resume compares the hello with the stored host run, as
    import does, and both name the same conflict; nothing of the spool is stored."""
    _orch, _host, _suites, store, run_id, spool = slow_run
    before, last_seq = _stored(store, run_id), store.last_seq(run_id, "gpu-a")
    docs = _lines(spool)
    assert docs[0]["type"] == "hello"
    _refused(slow_run, docs, _swap_hello(docs[0], field), before, last_seq)


def test_lines_after_done_are_left_out_by_resume_as_by_import(slow_run: Any) -> None:
    """Tester's LOW: a spool that grew after ``done``. The resume stored the extra line as an error row ("0 errors
    on the host, 1 stored") while the import left it out: now neither stores it, and both say so in the same
    words, the host ``failed``."""
    orch, _host, suites, store, run_id, spool = slow_run
    done_at = next(i for i, doc in enumerate(_lines(spool)) if doc.get("type") == "done")
    with spool.open("a") as f:
        f.write(json.dumps({"v": 1, "seq": done_at + 1, "type": "log", "message": "appended"}) + "\n")
    note = f"1 line after the done line (line {done_at}) were not stored"

    rc, doc, err = _resume(orch, run_id, suites)

    assert rc == 1, err
    assert [(h["status"], h["results"]) for h in doc["hosts"]] == [("failed", 3)], doc
    hr = store.get_run(run_id).host_run("gpu-a")
    assert hr is not None and hr.status == "failed" and note in (hr.error or ""), hr.error
    assert (hr.last_seq, hr.errors) == (done_at, 0)

    res = orch("runs", "import", str(spool), "--suite-dir", str(suites), "--json", timeout=scaled(120))
    assert res.returncode == 1, res.stdout + res.stderr
    out = json.loads(res.stdout)
    assert out["new_lines"] == 0 and out["status"] == "failed" and note in out["error"], out
    hr = store.get_run(run_id).host_run("gpu-a")
    assert hr is not None and (hr.last_seq, hr.errors, hr.results) == (done_at, 0, 3)


def _rewrite_first_wall_ms(spool: Path) -> tuple[int, float]:
    """Rewrite, in place and at the same length, the ``wall_ms`` value of the spool's first result line (the
    agent's appender and follower watch the file's last 64 bytes, its size and inode, none of which change):
    its seq and the new value."""
    data = spool.read_bytes()
    lines = data.split(b"\n")
    seq = next(i for i, line in enumerate(lines) if json.loads(line).get("type") == "result")
    start = sum(len(x) + 1 for x in lines[:seq])
    found = re.compile(rb'"value":\s*([0-9][0-9.eE+-]*)').search(lines[seq], lines[seq].index(b'"wall_ms"'))
    assert found is not None, lines[seq]
    old = found.group(1)
    new = bytes(b if not chr(b).isdigit() else ord("1" if old.startswith(b"9") else "9") for b in old)
    at = start + found.start(1)
    assert at + len(new) < len(data) - 64, "the rewrite must not touch the bytes the agent reads back"
    with spool.open("r+b") as f:
        f.seek(at)
        f.write(new)
    return seq, float(new)


def test_a_reconnect_after_a_drop_refuses_a_spool_rewritten_meanwhile(one_host_any_db: tuple[Orch, Any],
                                                                       tmp_path: Path) -> None:  # fmt: skip
    """The same hole on the reconnect after a dropped SSH session: the follow went on from the first line not
    stored, so a stored line rewritten on the host while the session was down was never looked at and the run
    ended ``completed``. The reattached follow compares the stored lines as a resume does."""
    orch, host = one_host_any_db
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "slow.yaml").write_text(SLOW_SUITE)
    store = Store.from_url(orch.db_url)
    proc = orch.popen("run", "slow", "--hosts", "gpu-a", "--suite-dir", str(suites), "--timeout", str(scaled(30)),
                      "--json")  # fmt: skip
    try:
        run_id = wait_first_result(store, proc)
        spool = host.home / ".orch" / "runs" / run_id / "gpu-a" / "events.jsonl"
        wait_for(lambda: len(_lines(spool)) >= 4, timeout_s=60, what="the second case's start on the host")
        stored = {r.seq: r.metrics["wall_ms"]["value"] for r in store.results(run_id, limit=100).items}
        seq, new = _rewrite_first_wall_ms(spool)
        host.kill_sessions()  # the SSH session drops: orch reconnects and follows again
        out, err = proc.communicate(timeout=scaled(240))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, err[-3000:]
    doc = json.loads(out)
    assert doc["status"] != "completed" and [h["status"] for h in doc["hosts"]] == ["failed"], doc
    hr = store.get_run(run_id).host_run("gpu-a")
    assert hr is not None and hr.status == "failed"
    assert f"line {seq}: metric wall_ms.value is {new!r}, {stored[seq]!r} stored" in (hr.error or ""), hr.error
    after = {r.seq: r.metrics["wall_ms"]["value"] for r in store.results(run_id, limit=100).items}
    assert {k: after.get(k) for k in stored} == stored and hr.results < 3, after  # the rest was not stored
    store.close()


@pytest.mark.parametrize("path", ["resume", "import"])
def test_a_case_whose_parameters_are_not_the_runs_case_list_entry_is_an_error_row(slow_run: Any, path: str) -> None:
    """Issue 10, a tester's case: a spool crafted consistently — case 2's ``case_start`` and ``result`` both
    carry s=1, while the case list the run sent to the agent (``host_runs.info.spec``) has s=7 at index 2 — was
    stored as an ok row under s=1 by the resume and by ``orch runs import``, run completed. Now the parameters of
    each case line are compared with the run's case list: the case is an error row naming both parameter sets,
    under the run's parameters; the host is failed."""
    orch, _host, suites, store, run_id, spool = slow_run
    docs = _lines(spool)
    for doc in docs:
        if doc.get("case_index") == 2:
            doc["case"]["s"] = 1
            doc["case"]["argv"][-1] = "1"
    spool.write_text("".join(json.dumps(d) + "\n" for d in docs))

    if path == "resume":
        rc, _out, err = _resume(orch, run_id, suites)
    else:
        res = orch("runs", "import", str(spool), "--suite-dir", str(suites), "--json", timeout=scaled(120))
        rc, err = res.returncode, res.stdout + res.stderr

    assert rc == 1, err
    rows = store.results(run_id, limit=100).items
    assert not [r for r in rows if r.case.get("s") == 1], "stored under the spool's parameters"
    assert [(r.case_index, r.case, r.status) for r in rows if r.case_index == 2] == [
        (2, {"s": 7}, "error"), (2, {"s": 7}, "error")
    ]  # fmt: skip
    said = (r.error or "" for r in rows if r.case_index == 2)
    start = next(said)
    assert "(case_start): its case parameters {" in start and '"s": 1' in start, start
    assert "are not those of case 2 in the case list the run sent to the agent, {" in start, start
    assert '"s": 7' in start.split("the run sent to the agent, ")[1], start
    hr = store.get_run(run_id).host_run("gpu-a")
    assert hr is not None and hr.status == "failed", hr
    assert store.get_run(run_id).status != "completed"


def test_resume_compares_the_stored_log_lines(slow_run: Any, tmp_path: Path) -> None:
    """Issue 10, a tester's case: a log line was never compared by the resume (nor the import): a spool whose
    stored log line says other words was taken as the stored one. Here the log line (at the first position orch
    had not stored) is stored by an import of a copy without the done line; the spool is then rewritten on the
    host. The resume, and the import, refuse it naming the line and both texts; nothing of it is stored."""
    orch, _host, suites, store, run_id, spool = slow_run
    docs = _lines(spool)
    at = store.last_seq(run_id, "gpu-a") + 1
    docs.insert(at, {"v": 1, "seq": at, "type": "log", "ts": docs[at - 1]["ts"], "level": "info",
                     "message": "warming up"})  # fmt: skip
    for pos, doc in enumerate(docs):
        doc["seq"] = pos
    docs[-1]["counts"]["lines"] = len(docs) - 1
    copy = tmp_path / "copy.jsonl"
    copy.write_text("".join(json.dumps(d) + "\n" for d in docs[:-1]))  # as copied before the agent ended
    res = orch("runs", "import", str(copy), "--host", "gpu-a", "--suite-dir", str(suites), "--json",
               timeout=scaled(120))  # fmt: skip
    assert res.returncode == 1 and json.loads(res.stdout)["status"] == "unfinished", res.stdout + res.stderr
    before, last_seq = _stored(store, run_id), store.last_seq(run_id, "gpu-a")
    assert last_seq == len(docs) - 2
    docs[at]["message"] = "rewritten"
    _refused(slow_run, docs, f"line {at}: log text is '[info] rewritten', '[info] warming up' stored", before,
             last_seq)  # fmt: skip
