"""``orch runs import`` on SQLite and PostgreSQL, a tester's reports:

- the spools of a 2-host run imported one by one into a new store: the second host was refused ("run … has no
  host 'lh2'"; without --host: a conflict) — each host of a run imports, its name taken from the spool's place
  ``<orch_home>/runs/<run_id>/<host>/events.jsonl`` when --host is not given;
- three concurrent imports of one spool into a new store: two failed "UNIQUE constraint failed: runs.id";
- a case whose output the parser cannot read was reported as data the store lost, the host failed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.errors import UsageError
from orchestrator.spool_import import import_spool
from orchestrator.store.repo import Store
from orchestrator.suites.loader import load_registry
from tests.integration.test_spool_import_checks import ECHO_SUITE, RUN_ID, _result, echo_lines


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    d = tmp_path / "suites"
    d.mkdir()
    (d / "echo-t.yaml").write_text(ECHO_SUITE)
    return d


def _spool_at(home: Path, host: str, hostname: str) -> Path:
    """An echo-t spool where the agent keeps it: ``<home>/runs/<run_id>/<host>/events.jsonl``."""
    lines = echo_lines()
    lines[0] = lines[0].replace(b'"hostname": "l1"', f'"hostname": "{hostname}"'.encode())
    path = home / "runs" / RUN_ID / host / "events.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def _orch(db_url: str, cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "orchestrator", "--db", db_url, "--inventory",
                             str(cwd / "none.yaml"), "runs", "import", *args, "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)  # fmt: skip


def test_the_second_host_of_a_run_imports_into_a_new_store(store: Store, tmp_path: Path, suite_dir: Path) -> None:
    a = _spool_at(tmp_path / "A", "lh", "box-a")
    b = _spool_at(tmp_path / "B", "lh2", "box-b")
    reg = load_registry([suite_dir])
    first = import_spool(store, a, host=None, registry=reg)  # the host named by the spool's place
    assert (first.host, first.created_run, first.status, first.run_status) == ("lh", True, "completed", "completed")
    second = import_spool(store, b, host=None, registry=reg)
    assert (second.host, second.created_run, second.status, second.results) == ("lh2", False, "completed", 3)
    assert second.run_status == "completed"
    detail = store.get_run(RUN_ID)
    assert detail.hosts == ["lh", "lh2"] and (detail.results, detail.errors) == (6, 0)
    assert [h.facts.get("hostname") for h in detail.host_runs if h.facts] == ["box-a", "box-b"]
    again = import_spool(store, b, host="lh2", registry=reg)  # idempotent per host
    assert (again.new_lines, again.results) == (0, 3) and store.get_run(RUN_ID).results == 6


def test_three_concurrent_imports_of_one_spool_give_one_run(tmp_path: Path, db_url: str, suite_dir: Path) -> None:
    if db_url.startswith("sqlite"):
        db_url = f"sqlite:///{tmp_path / 'new.db'}"  # a new file: the first start migrates it, concurrently
    else:
        s = Store.from_url(db_url)
        s.upgrade()
        s.close()
    spool = _spool_at(tmp_path / "A", "lh", "box-a")
    procs = [_orch(db_url, tmp_path, str(spool), "--suite-dir", str(suite_dir)) for _ in range(3)]
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
        doc = json.loads(out)
        assert (doc["run_id"], doc["host"], doc["status"], doc["results"]) == (RUN_ID, "lh", "completed", 3)
    assert sum(json.loads(o)["created_run"] for o, _ in outs) == 1
    store = Store.from_url(db_url)
    try:
        detail = store.get_run(RUN_ID)
        assert (detail.status, detail.hosts, detail.results, detail.errors) == ("completed", ["lh"], 3, 0)
        assert [r.seq for r in store.results(RUN_ID).items] == [2, 4, 6]
    finally:
        store.close()


def test_a_parse_error_is_a_failed_case_not_a_lost_line(store: Store, tmp_path: Path, suite_dir: Path) -> None:
    lines = echo_lines()
    lines[4] = _result(4, 1, info={"exit_status": 0, "parsed": "stdout", "stdout": "oops\n", "outputs": ["oops\n"]})
    path = tmp_path / "events.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    out = import_spool(store, path, host="l1", registry=load_registry([suite_dir]))
    assert (out.status, out.run_status, out.results, out.errors) == ("partial", "partial", 2, 1)
    # not "3 results on the host, 2 stored": every line is stored; the first failure is named
    assert (out.error or "").startswith("1 case failed: parser regex found no match"), out.error
    rec = store.get_run(RUN_ID).host_run("l1")
    assert rec is not None and rec.status == "completed" and rec.error == out.error
    [err] = store.results(RUN_ID, status="error").items
    assert (err.seq, err.case_index, err.info.get("agent_result")) == (4, 1, True)
    assert (err.error or "").startswith("parser regex found no match")


def _with_host(lines: list[bytes], host: str) -> list[bytes]:
    """The spool as agents since the hello's ``host`` write it."""
    hello = json.loads(lines[0])
    return [json.dumps({**hello, "host": host}).encode(), *lines[1:]]


def test_a_spool_is_stored_under_the_host_its_hello_names_and_no_other(
    store: Store, tmp_path: Path, suite_dir: Path
) -> None:
    """A new user imported box-0's spool with ``--host box-1``, then ``--host nosuchhost``: each stored its 7
    results again, under a host that never measured them, exit 0. The hello names the host now: a ``--host`` that
    differs is refused (exit 2) before anything is stored; without ``--host`` the hello's host is taken, wherever
    the file lies."""
    reg = load_registry([suite_dir])
    spool = tmp_path / "copied.jsonl"  # off its run directory: the path says nothing
    spool.write_bytes(b"".join(line + b"\n" for line in _with_host(echo_lines(), "box-0")))
    for other in ("box-1", "nosuchhost"):
        with pytest.raises(UsageError) as exc:
            import_spool(store, spool, host=other, registry=reg)
        assert exc.value.message == (
            f"{spool}:1: the spool was written for host 'box-0' (its hello says so), not {other!r}; nothing was "
            "imported"
        )
        assert exc.value.hint.startswith(f"orch runs import {spool} --host box-0 (or leave --host out)")
    assert store.list_runs().items == []
    out = import_spool(store, spool, host=None, registry=reg)
    assert (out.host, out.results, out.status) == ("box-0", 3, "completed")
    assert import_spool(store, spool, host="box-0", registry=reg).new_lines == 0
    assert store.get_run(RUN_ID).hosts == ["box-0"]


def test_a_run_started_by_orch_run_takes_no_host_it_was_not_started_on(
    store: Store, tmp_path: Path, suite_dir: Path
) -> None:
    """A spool of an older agent (no host in its hello) imported with a ``--host`` that is not one of a live run's
    hosts: refused; the run's host list is what ``orch run`` started it on."""
    reg = load_registry([suite_dir])
    store.create_run(suite="echo-t", params={}, preset=None, label=None, hosts=["box-0", "box-1"],
                     started_by="root@box", started_on="box", run_id=RUN_ID)  # fmt: skip
    spool = tmp_path / "old.jsonl"
    spool.write_bytes(b"".join(line + b"\n" for line in echo_lines()))
    with pytest.raises(UsageError) as exc:
        import_spool(store, spool, host="nosuchhost", registry=reg)
    assert exc.value.message == (
        f"{spool}: run {RUN_ID} was started by orch run on box-0, box-1; nosuchhost is not one of its hosts; "
        "nothing was imported"
    )
    assert store.get_run(RUN_ID).hosts == ["box-0", "box-1"] and store.get_run(RUN_ID).results == 0
    out = import_spool(store, spool, host="box-1", registry=reg)  # one of its hosts: imported
    assert (out.host, out.results) == ("box-1", 3)


@pytest.mark.parametrize("bad", ["a\x00b", "../etc", "-x", "h3[/bold]"])
def test_a_host_name_the_inventory_would_refuse_is_refused_from_a_hello_or_host(
    store: Store, tmp_path: Path, suite_dir: Path, bad: str
) -> None:
    """The hello's host is taken as the stored host's name: it follows the inventory's rule for names (a NUL in
    one was stored raw on SQLite and would fail on PostgreSQL)."""
    reg = load_registry([suite_dir])
    spool = tmp_path / "bad.jsonl"
    spool.write_bytes(b"".join(line + b"\n" for line in _with_host(echo_lines(), bad)))
    with pytest.raises(UsageError, match="which is not a host name; nothing was imported"):
        import_spool(store, spool, host=None, registry=reg)
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(b"".join(line + b"\n" for line in echo_lines()))
    with pytest.raises(UsageError, match=r"^--host .* which is not a host name"):
        import_spool(store, plain, host=bad, registry=reg)
    assert store.list_runs().items == []
