"""``orch cancel RUN_ID`` from a second process over real sshd (issue 19: "orch cancel no longer stops remote
agents" went unnoticed): every process of the run on each host — the agent's worker, its whole session and the
benchmark command's own children — is gone, the run and its host runs are stored ``cancelled``, and the ``orch
run`` that started it (alive, or killed before the cancel) ends cancelled too.

The benchmark is a command suite (no torch): ``sleep SECS & sleep SECS``, a background child and a foreground
one, with a SECS no other process on the machine uses, so every one of them can be found with ``ps``."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.compute import short_run_id
from orchestrator.store.repo import Store
from tests.e2e.cancel_counts import latest_run
from tests.e2e.conftest import Orch
from tests.plugins.sshd import SshdBed
from tests.plugins.timing import scaled, wait_for

pytestmark = [pytest.mark.sshd]

SUITE = """\
name: cancel-sleeper
description: each case leaves a background child (sleep SECS &) and waits on a second sleep
command: ["sh", "-c", "sleep {secs} & sleep {secs}; echo 'tput: 1'"]
params:
  secs: {type: str, default: "1", help: "seconds each sleep takes"}
  n: {type: list, default: [1, 2], help: "cases"}
parser: {name: regex, pattern: 'tput: (?P<tput>\\d+)'}
metrics:
  tput: {path: tput, unit: tok/s}
warmup: 0
repeat: 1
timeout_s: 1800
"""

HOSTS = ("gpu-a", "gpu-b")


def _procs() -> list[tuple[int, int, int, str]]:
    """Every process on the machine: (pid, process group, session, command line)."""
    argv = ["ps", "-ww", "-eo", "pid=,pgid=,sid=,args="]  # -ww: whole command lines
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        pid, pgid, sid, args = (line.split(None, 3) + [""])[:4]
        rows.append((int(pid), int(pgid), int(sid), args))
    return rows


def _sleeps(secs: str) -> list[int]:
    return [pid for pid, _, _, args in _procs() if args == f"sleep {secs}"]


def _in_sessions(sids: set[int]) -> list[tuple[int, int, int, str]]:
    """The processes of these sessions (the agent's worker leads its own: pid = process group = session)."""
    return [p for p in _procs() if p[2] in sids or p[0] in sids]


def _kill(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _start(sshd_bed: SshdBed, tmp_path: Path, secs: str) -> tuple[Orch, Store, subprocess.Popen[str], list[Any]]:
    """gpu-a (group ct200) and gpu-b (b300) on real sshd, and ``orch run cancel-sleeper`` over both with ``secs``:
    (orch, the store, the running orch, the two hosts)."""
    a, b = sshd_bed.add(HOSTS[0]), sshd_bed.add(HOSTS[1])
    inv = tmp_path / "inventory.yaml"
    inv.write_text(sshd_bed.inventory_yaml({"ct200": [a], "b300": [b]}))
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "sleeper.yaml").write_text(SUITE)
    store = Store.from_url(orch.db_url)
    proc = orch.popen("run", "cancel-sleeper", "--hosts", "ct200,b300", "--suite-dir", str(suites),
                      "--set", f"secs={secs}", "--timeout", str(scaled(30)), "--json")  # fmt: skip
    return orch, store, proc, [a, b]


def _started(store: Store, proc: subprocess.Popen[str], secs: str, hosts: list[Any]) -> tuple[str, dict[str, int]]:
    """Once both hosts' commands run (two sleeps each: the background child and the one waited on): the run's
    id and each host's worker pid."""
    wait_for(lambda: len(_sleeps(secs)) >= 4 or proc.poll() is not None, timeout_s=180,
             what="the benchmark command's two sleeps on each host")  # fmt: skip
    assert proc.poll() is None, proc.communicate()[1][-3000:]
    run_id = wait_for(lambda: latest_run(store), timeout_s=60, what="the stored run")
    workers = {}
    for h in hosts:
        pid_file = h.home / ".orch" / "runs" / run_id / h.name / "pid"
        workers[h.name] = int(wait_for(lambda p=pid_file: p.is_file() and p.read_text().strip(), timeout_s=60,
                                       what=f"{h.name}'s worker pid"))  # fmt: skip
    return run_id, workers


@pytest.mark.parametrize("first_orch", ["running", "killed"])
def test_orch_cancel_stops_every_process_of_the_run_on_each_host(
    sshd_bed: SshdBed, tmp_path: Path, first_orch: str
) -> None:
    secs = f"{1200 + random.random() * 100:.4f}"  # long enough never to end by itself during the test
    orch, store, proc, hosts = _start(sshd_bed, tmp_path, secs)
    homes = {h.name: h.home for h in hosts}
    workers: dict[str, int] = {}
    try:
        run_id, workers = _started(store, proc, secs, hosts)
        sessions = set(workers.values())
        before = _in_sessions(sessions)
        # the worker leads its own session and process group; the benchmark's sleeps are in that session
        for name, pid in workers.items():
            assert any(p[0] == pid and p[1] == pid and p[2] == pid for p in before), (name, pid, before)
        assert set(_sleeps(secs)) <= {p[0] for p in before}, (_sleeps(secs), before)
        assert {p[2] for p in before if p[3] == f"sleep {secs}"} == sessions  # two hosts, two sessions
        if first_orch == "killed":
            proc.kill()  # orch dies without a word; the agents run on, detached, on their hosts
            proc.communicate()
            assert sorted(_sleeps(secs)) == sorted(p[0] for p in before if p[3] == f"sleep {secs}")

        res = orch("cancel", run_id, "--json", timeout=scaled(240))  # a second process, knowing only the run id
        assert res.returncode == 0, res.stderr[-3000:]
        assert json.loads(res.stdout) == {
            "run_id": run_id,
            "suite": "cancel-sleeper",
            "status": "cancelled",
            "hosts": [{"host": name, "status": "cancelled", "results": 0, "errors": 0, "error": None,
                       "state_dir": None} for name in HOSTS],  # fmt: skip
        }
        left = _in_sessions(sessions)  # named in the failure: what the cancel left running
        wait_for(lambda: not _in_sessions(sessions) and not _sleeps(secs), timeout_s=60,
                 what=f"no process of the run left on the hosts (left when orch cancel returned: {left})")  # fmt: skip

        if first_orch == "running":  # the orch that started the run sees each agent's cancelled done line
            out, err = proc.communicate(timeout=scaled(240))
            assert proc.returncode == 1, err[-3000:]
            doc = json.loads(out)
            assert (doc["run_id"], doc["status"]) == (run_id, "cancelled"), doc
            assert [(h["host"], h["status"], h["results"]) for h in doc["hosts"]] == [
                (name, "cancelled", 0) for name in HOSTS
            ]
        detail = store.get_run(run_id)
        assert (detail.status, detail.results) == ("cancelled", 0)
        assert [(h.host, h.status) for h in detail.host_runs] == [(name, "cancelled") for name in HOSTS]
        for name in HOSTS:  # each agent wrote its end: a done line saying cancelled
            lines = (homes[name] / ".orch" / "runs" / run_id / name / "events.jsonl").read_text().splitlines()
            done = json.loads(lines[-1])
            assert (done["type"], done["status"]) == ("done", "cancelled"), lines[-1]
        again = orch("cancel", run_id)
        assert again.returncode == 2, again.stdout + again.stderr
        assert f"run {run_id[-8:]} already finished (cancelled); there is nothing to cancel" in again.stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        _kill({p[0] for p in _in_sessions(set(workers.values()))} | set(_sleeps(secs)))
        store.close()


def test_a_stop_that_failed_is_sent_again_by_a_second_cancel(sshd_bed: SshdBed, tmp_path: Path) -> None:
    """A tester: with orch killed and gpu-b's sshd down, ``orch cancel`` exits 1 (right) but stored the run
    cancelled with a plain "cancel failed" on gpu-b, so once gpu-b was back a second ``orch cancel`` was refused
    ("already finished", exit 2) and gpu-b's worker ran on. Now the failed stop is noted as not confirmed: the
    second cancel stops gpu-b, whose error is then "cancelled by the user" with the failed stop as history."""
    secs = f"{1300 + random.random() * 100:.4f}"
    orch, store, proc, hosts = _start(sshd_bed, tmp_path, secs)
    b = hosts[1]
    workers: dict[str, int] = {}
    try:
        run_id, workers = _started(store, proc, secs, hosts)
        proc.kill()
        proc.communicate()
        b.stop()  # gpu-b cannot be reached: its stop fails
        first = orch("cancel", run_id, "--json", "--timeout", str(scaled(10)), timeout=scaled(240))
        assert first.returncode == 1, first.stderr[-3000:]
        assert _in_sessions({workers["gpu-b"]}), "gpu-b's worker should still run"
        held = store.get_run(run_id).host_run("gpu-b")
        assert held is not None and held.error is not None and "the remote stop was not confirmed" in held.error
        b.start()
        again = orch("cancel", run_id, "--timeout", str(scaled(30)), timeout=scaled(240))
        assert again.returncode == 0, again.stdout + again.stderr[-3000:]
        # no --suite-dir: the user suite is not known here, so nothing was collected, and the answer says how
        said = " ".join(again.stdout.split())
        assert ("gpu-b: hint: what its spool holds beyond the stored lines was not collected: the run's suite "
                f"'cancel-sleeper' is not known here; collect it with orch run --resume {short_run_id(run_id)} "
                "--suite-dir DIR (the suite's folder)") in said, said  # fmt: skip
        wait_for(lambda: not _in_sessions(set(workers.values())) and not _sleeps(secs), timeout_s=60,
                 what="no process of the run left on either host")  # fmt: skip
        rec = store.get_run(run_id).host_run("gpu-b")
        assert rec is not None and (rec.status, rec.error) == ("cancelled", "cancelled by the user"), rec
        assert "the remote stop was not confirmed" in rec.earlier_errors[0]["error"], rec.earlier_errors
        third = orch("cancel", run_id)
        assert third.returncode == 2 and "already finished (cancelled)" in third.stderr, third.stderr
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        _kill({p[0] for p in _in_sessions(set(workers.values()))} | set(_sleeps(secs)))
        store.close()


def test_a_second_cancel_collects_what_a_host_finished_while_it_could_not_be_reached(
    sshd_bed: SshdBed, tmp_path: Path
) -> None:
    """A new user: orch killed, the agents then finished (``done`` completed on each host), gpu-b's sshd down at the
    first ``orch cancel`` (exit 1, its stop not confirmed); the second ``orch cancel`` once gpu-b was back stored it
    ``cancelled`` with 0 results, although its spool held them and a done. The second cancel now collects, as
    the first does: gpu-b keeps its own verdict and results."""
    secs = f"{0.2 + random.random() * 0.1:.4f}"
    orch, store, proc, hosts = _start(sshd_bed, tmp_path, secs)
    b = hosts[1]
    suites = ("--suite-dir", str(tmp_path / "suites"))
    try:
        run_id = wait_for(lambda: latest_run(store) or proc.poll() is not None, timeout_s=120, what="the stored run")
        assert isinstance(run_id, str), proc.communicate()[1][-3000:]
        spools = [h.home / ".orch" / "runs" / run_id / h.name / "events.jsonl" for h in hosts]
        # the run is stored before orch starts the agents: killed before a host's start, that host never ran
        # (under load this window was seconds wide, and the test waited for a done that could not come)
        wait_for(lambda: all(s.is_file() for s in spools) or proc.poll() is not None, timeout_s=120,
                 what="both agents' spools")  # fmt: skip
        proc.kill()  # orch dies; the agents run on and finish
        proc.communicate()
        wait_for(lambda: all(s.is_file() and b'"done"' in s.read_bytes() for s in spools), timeout_s=180,
                 what="both agents' done lines")  # fmt: skip
        b.stop()
        first = orch("cancel", run_id, "--json", "--timeout", str(scaled(10)), *suites, timeout=scaled(240))
        assert first.returncode == 1, first.stdout + first.stderr[-3000:]
        b.start()
        again = orch("cancel", run_id, "--json", "--timeout", str(scaled(30)), *suites, timeout=scaled(240))
        assert again.returncode == 0, again.stdout + again.stderr[-3000:]
        recs = {h.host: h for h in store.get_run(run_id).host_runs}
        assert [(recs[n].status, recs[n].results) for n in HOSTS] == [("completed", 2), ("completed", 2)], recs
        assert {h["host"]: (h["status"], h["results"]) for h in json.loads(again.stdout)["hosts"]} == {
            "gpu-b": ("completed", 2), "gpu-a": ("completed", 2)}  # fmt: skip
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        store.close()
