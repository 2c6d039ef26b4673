"""The agent CLI as the orchestrator drives it: real processes, a temporary orch home, the ``sleep`` bench."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agents.orch_agent import spec as agent_spec
from agents.orch_agent.runs import pid_alive
from orchestrator.protocol import parse_line

ROOT = Path(__file__).resolve().parents[2]


HOST = "h1"


def agent(home: Path, *args: str, timeout: float = 60, input: str | None = None,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "agents.orch_agent", *args, "--orch-home", str(home), "--host", HOST],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        input=input,
    )


def start(home: Path, spec_json: str) -> subprocess.CompletedProcess[str]:
    """``agent start --spec -``: the spec on stdin, as orch sends it."""
    return agent(home, "start", "--spec", "-", input=spec_json)


def run_dir(home: Path, run_id: str) -> Path:
    return home / "runs" / run_id / HOST


def spec(run_id: str, cases: list[dict[str, Any]], **kw: Any) -> str:
    return json.dumps({"run_id": run_id, "suite": "test", "bench": "sleep", "cases": cases, **kw})


def wait_for(pred: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def spool_types(home: Path, run_id: str) -> list[str]:
    path = run_dir(home, run_id) / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(x)["type"] for x in path.read_text().splitlines()]


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    h = tmp_path / "orch"
    yield h
    # Never leave a worker behind, whatever the test did.
    for run in (h / "runs").glob("*/*") if (h / "runs").exists() else []:
        pid_file = run / "pid"
        if pid_file.exists():
            pid = int(pid_file.read_text())
            if pid_alive(pid):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def test_version_and_facts(home: Path) -> None:
    v = agent(home, "version")
    assert v.returncode == 0
    doc = json.loads(v.stdout)
    assert doc["protocol"] == 1 and doc["agent_version"] == "dev"
    # facts probes torch in a child; the exact keys are the contract with doctor
    login = home.parent / "login"  # deployed agents and builds are read from the login user's ~/.orch
    login.mkdir()
    f = json.loads(agent(home, "facts", env={**os.environ, "HOME": str(login)}).stdout)
    assert set(f) == {
        "hostname", "kernel", "cpu_count", "mem_total_bytes", "python", "torch", "nvidia_smi", "fleet", "disk",
        "orch", "leases",
    }  # fmt: skip
    assert set(f["torch"]) == {
        "ok", "version", "cuda_available", "cuda_version", "device_count", "devices", "error", "nccl_version",
        "cached_at",
    }  # fmt: skip
    assert set(f["fleet"]) == {"remapped_rows", "nvlink", "xid", "cpu_governors", "loadavg"}
    assert f["orch"] == {"home": str(home), "agents": [], "builds": [], "current_build": None}
    # the torch probe's cache (torch imports here) creates the home; without it the nearest existing parent
    assert f["disk"]["path"] == str(home if f["torch"]["ok"] else home.parent) and f["disk"]["free_bytes"] > 0


def test_start_runs_detached_and_follow_streams_everything(home: Path) -> None:
    cases = [{"ms": 1}, {"ms": 1, "fail": "boom"}, {"ms": 1}]
    t0 = time.monotonic()
    out = start(home, spec("r1", cases))
    assert out.returncode == 0, out.stderr
    started = json.loads(out.stdout)
    assert started["run_id"] == "r1" and started["started"] is True and started["pid"] > 0
    assert time.monotonic() - t0 < 20  # returns at once, does not wait for the cases
    fol = agent(home, "follow", "r1", "--from", "0")
    assert fol.returncode == 0, fol.stderr
    events = [parse_line(x, expected_seq=i) for i, x in enumerate(fol.stdout.splitlines())]
    assert [e.seq for e in events] == list(range(len(events)))
    assert [e.type for e in events] == [
        "hello", "case_start", "result", "case_start", "error", "case_start", "result", "done",
    ]  # fmt: skip
    hello, err, done = events[0], events[4], events[-1]
    assert (
        hello.data["run_id"] == "r1"
        and hello.data["cases_total"] == 3
        and hello.data["agent_version"] == "dev"
    )
    assert "hostname" in hello.data["facts"]
    assert (
        err.case_index == 1 and err.case == cases[1] and err.data["message"].startswith("RuntimeError: boom")
    )
    assert events[2].metrics()["time_ms"].unit == "ms"
    assert done.data == {"status": "completed", "counts": {"lines": 7, "results": 2, "errors": 1}}
    st = json.loads(agent(home, "status", "r1").stdout)
    assert st["state"] == "finished" and st["lines"] == 8 and st["done"]["status"] == "completed"
    wait_for(lambda: not pid_alive(started["pid"]))

    # idempotent start for resume: a finished run is reported, not run again
    again = start(home, spec("r1", cases))
    assert again.returncode == 0 and json.loads(again.stdout)["started"] is False
    assert len(spool_types(home, "r1")) == 8
    # same run id, different spec: refused
    other = start(home, spec("r1", [{"ms": 2}]))
    assert other.returncode == 2 and json.loads(other.stdout)["code"] == "spec_mismatch"


def test_follow_from_seq_while_running(home: Path) -> None:
    assert start(home, spec("r2", [{"ms": 150}] * 4)).returncode == 0
    fol = agent(home, "follow", "r2", "--from", "3", "--poll-s", "0.02")
    assert fol.returncode == 0, fol.stderr
    seqs = [json.loads(x)["seq"] for x in fol.stdout.splitlines()]
    assert seqs == list(range(3, 10))
    assert json.loads(fol.stdout.splitlines()[-1])["type"] == "done"
    # following a finished run from past its end prints nothing and exits 0
    tail = agent(home, "follow", "r2", "--from", "10")
    assert tail.returncode == 0 and tail.stdout == ""


def test_start_refuses_second_worker_and_cancel_stops_it(home: Path) -> None:
    s = spec("r3", [{"ms": 60000}, {"ms": 1}])
    pid = json.loads(start(home, s).stdout)["pid"]
    wait_for(lambda: "case_start" in spool_types(home, "r3"))
    dup = start(home, s)
    assert dup.returncode == 2 and json.loads(dup.stdout)["code"] == "already_running"
    assert json.loads(agent(home, "status", "r3").stdout)["state"] == "running"
    t0 = time.monotonic()
    res = json.loads(agent(home, "cancel", "r3").stdout)
    assert res == {"run_id": "r3", "was_running": True, "killed": False}
    assert time.monotonic() - t0 < 10
    assert not pid_alive(pid)
    types = spool_types(home, "r3")
    assert types[-1] == "done" and types.count("done") == 1 and "result" not in types
    done = json.loads((run_dir(home, "r3") / "events.jsonl").read_text().splitlines()[-1])
    assert done["status"] == "cancelled"
    assert json.loads(agent(home, "status", "r3").stdout)["state"] == "finished"


FAKE_WORKER = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)          # a wedged worker: ignores SIGTERM
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
open(sys.argv[2] + "/child", "w").write(str(child.pid))
time.sleep(120)
"""


def test_cancel_kills_the_whole_group_of_a_wedged_worker(home: Path) -> None:
    run = run_dir(home, "wedged")
    run.mkdir(parents=True)
    (run / "events.jsonl").write_text('{"v":1,"seq":0,"type":"hello","ts":1}\n')
    # argv carries "_worker RUN_DIR" like a real worker, so the agent recognises it
    proc = subprocess.Popen(
        [sys.executable, "-c", FAKE_WORKER, "_worker", str(run)], start_new_session=True, cwd=run
    )
    try:
        (run / "pid").write_text(str(proc.pid))
        wait_for(lambda: (run / "child").exists() and (run / "child").read_text() != "")
        child = int((run / "child").read_text())
        res = agent(home, "cancel", "wedged", "--grace-s", "0.5")
        assert json.loads(res.stdout) == {"run_id": "wedged", "was_running": True, "killed": True}
        proc.wait(timeout=10)
        wait_for(lambda: not pid_alive(child), timeout=10)
        lines = (run / "events.jsonl").read_text().splitlines()
        done = json.loads(lines[-1])
        assert done["seq"] == 1 and done["type"] == "done" and done["status"] == "cancelled"
        assert done["counts"] == {"lines": 1, "results": 0, "errors": 0}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_follow_passes_corrupted_lines_through(home: Path) -> None:
    run = run_dir(home, "corrupt")
    run.mkdir(parents=True)
    raw = (
        b'{"v":1,"seq":0,"type":"hello","ts":1.0,"run_id":"corrupt"}\n'
        b"\x00\xffnot json at all {\n"
        b'{"v":1,"seq":2,"type":"done","ts":2.0,"status":"completed","counts":{"results":0,"errors":0}}\n'
    )
    (run / "events.jsonl").write_bytes(raw)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "agents.orch_agent",
            "follow",
            "corrupt",
            "--from",
            "1",
            "--orch-home",
            str(home),
            "--host",
            HOST,
        ],
        cwd=ROOT,
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0
    assert out.stdout == raw.split(b"\n", 1)[1]  # byte for byte, from line 1 on
    ev = parse_line(out.stdout.splitlines()[0], expected_seq=1)
    assert ev.type == "error" and ev.seq == 1 and ev.data["kind"] == "protocol"


def test_follow_and_status_of_a_dead_worker_and_missing_run(home: Path) -> None:
    run = run_dir(home, "dead")
    run.mkdir(parents=True)
    (run / "events.jsonl").write_text('{"v":1,"seq":0,"type":"hello","ts":1}\n')
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (run / "pid").write_text(str(gone.pid))
    fol = agent(home, "follow", "dead", "--from", "0")
    assert fol.returncode == 3
    assert fol.stdout.splitlines() == ['{"v":1,"seq":0,"type":"hello","ts":1}']
    assert json.loads(fol.stderr)["error"] == "agent worker exited without finishing"
    assert json.loads(agent(home, "status", "dead").stdout)["state"] == "dead"
    (run / "spec.json").write_text(json.dumps(agent_spec.validate(json.loads(spec("dead", [])))))
    restart = start(home, spec("dead", []))
    assert restart.returncode == 3 and json.loads(restart.stdout)["code"] == "worker_dead"
    assert spool_types(home, "dead") == ["hello"]  # nothing was started again

    missing = agent(home, "follow", "nope", "--from", "0")
    assert missing.returncode == 4 and json.loads(missing.stderr)["code"] == "no_such_run"
    st = agent(home, "status", "nope")
    assert st.returncode == 4 and json.loads(st.stdout)["state"] == "unknown"
    assert agent(home, "cancel", "nope").returncode == 4


def test_bad_spec_is_rejected_before_anything_starts(home: Path) -> None:
    out = start(home, '{"run_id": "x", "bench": "nope", "cases": []}')
    assert out.returncode == 2
    assert "bench" in json.loads(out.stdout)["error"]
    assert not (home / "runs" / "x").exists()


def test_cancel_writes_no_done_into_a_spool_shorter_than_orch_stored(home: Path) -> None:
    """The spool was cut after orch stored 4 of its lines (``head -n 2 events.jsonl > t; cat t > events.jsonl``):
    cancel appended ``done`` as line 2, a seq orch had stored as something else. With ``--stored`` (orch's
    position) it writes nothing and says so, exit 6; a spool holding every stored line still gets its done."""
    run = run_dir(home, "cut")
    run.mkdir(parents=True)
    spool = run / "events.jsonl"
    kept = '{"v":1,"seq":0,"type":"hello","ts":1}\n{"v":1,"seq":1,"type":"case_start","ts":1,"case_index":0}\n'
    spool.write_text(kept)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (run / "pid").write_text(str(gone.pid))
    res = agent(home, "cancel", "cut", "--stored", "4")
    assert res.returncode == 6, res.stdout + res.stderr
    doc = json.loads(res.stdout)
    assert doc["code"] == "spool_changed" and (doc["lines"], doc["stored"]) == (2, 4), doc
    assert doc["error"] == (f"the spool {spool} has 2 lines, orch had stored 4: it was cut or rewritten on the host "
                            "after orch read it; no done line written")  # fmt: skip
    assert spool.read_text() == kept
    ok = agent(home, "cancel", "cut", "--stored", "2")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert spool_types(home, "cut") == ["hello", "case_start", "done"]


@pytest.mark.parametrize("removed", [("pid", "pid.start", "events.jsonl"), ("pid", "pid.start", "events.jsonl",
                                                                             "spec.json")])  # fmt: skip
def test_start_never_launches_a_second_worker_where_a_live_one_works(home: Path, removed: tuple[str, ...]) -> None:
    """The testers' finding: with the pid file gone and no spool (a start that died between the fork and the pid
    file, or files removed by hand), the run read ``unknown`` and a second ``start`` launched a second worker in the
    same directory: two workers writing one spool. Now ``start`` looks for a live worker of the run working in the
    directory (``runs.workers_in``) before it launches one, whatever the files say."""
    s = spec("r9", [{"ms": 60000}])
    pid = json.loads(start(home, s).stdout)["pid"]
    wait_for(lambda: "case_start" in spool_types(home, "r9"))
    for name in removed:
        (run_dir(home, "r9") / name).unlink()
    try:
        dup = start(home, s)
        out = json.loads(dup.stdout)
        assert dup.returncode == 2 and out["code"] == "already_running", dup.stdout + dup.stderr
        assert f"already has a live worker (pid {pid})" in out["error"], out
        assert pid_alive(pid)
        assert not (run_dir(home, "r9") / "pid").exists()  # nothing launched: no second worker's pid file
    finally:
        os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("how", ["moved", "removed"])
def test_start_never_launches_a_second_worker_when_the_live_one_s_directory_moved(home: Path, how: str) -> None:
    """The variant tester: with the live worker's run directory moved away (``mv``) or removed, a second ``start``
    of the run made a new directory at the old path and launched a second worker: :func:`runs.workers_in` looks
    for workers by the directory's inode, which the new one does not share. Now ``start`` also finds a worker of
    this run and host working elsewhere (``runs.workers_elsewhere``: the moved directory's spec.json, or a removed
    directory and the worker's ``--run-id``/``--host``) and refuses, naming it and where it works."""
    s = spec("r10", [{"ms": 60000}])
    first = agent(home, "start", "--spec", "-", "--run-id", "r10", input=s)
    assert first.returncode == 0, first.stdout + first.stderr
    pid = json.loads(first.stdout)["pid"]
    wait_for(lambda: "case_start" in spool_types(home, "r10"))
    rd = run_dir(home, "r10")
    if how == "moved":
        rd.rename(rd.with_name(HOST + ".moved"))
    else:
        shutil.rmtree(rd)
    try:
        dup = agent(home, "start", "--spec", "-", "--run-id", "r10", input=s)
        out = json.loads(dup.stdout)
        assert dup.returncode == 2 and out["code"] == "already_running", dup.stdout + dup.stderr
        assert f"already has a live worker (pid {pid}) for {HOST}, working in " in out["error"], out
        assert ("moved" in out["cwd"]) if how == "moved" else out["cwd"].endswith(" (deleted)"), out
        assert pid_alive(pid)
        assert not rd.exists()  # nothing launched, and no empty directory left at the old path
        cancel = agent(home, "cancel", "r10")  # before: wrote a done "cancelled" there while the worker ran on
        assert json.loads(cancel.stdout)["code"] == "no_such_run", cancel.stdout + cancel.stderr
        assert pid_alive(pid)
    finally:
        os.kill(pid, signal.SIGKILL)


def test_a_worker_of_the_same_run_id_in_another_orch_home_is_another_run(home: Path, tmp_path: Path) -> None:
    """``workers_elsewhere`` matches a worker by its run directory's spec.json: the same run id and host under
    another orch home (two users' homes, or tests that reuse a run id) is another run, never a reason to refuse."""
    other = tmp_path / "other-home"
    s = spec("r11", [{"ms": 60000}])
    first = agent(other, "start", "--spec", "-", "--run-id", "r11", input=s)
    pid = json.loads(first.stdout)["pid"]
    try:
        wait_for(lambda: "case_start" in spool_types(other, "r11"))
        here = agent(home, "start", "--spec", "-", "--run-id", "r11", input=s)
        assert here.returncode == 0 and json.loads(here.stdout)["started"] is True, here.stdout + here.stderr
        os.kill(json.loads(here.stdout)["pid"], signal.SIGKILL)
    finally:
        os.kill(pid, signal.SIGKILL)


def _raw_start(*args: str, spec_json: str) -> subprocess.CompletedProcess[str]:
    """``agent start --spec -`` with the options exactly as given (no --orch-home/--host added)."""
    return subprocess.run([sys.executable, "-m", "agents.orch_agent", "start", "--spec", "-", *args], cwd=ROOT,
                          input=spec_json, capture_output=True, text=True, timeout=60, check=False)  # fmt: skip


@pytest.mark.parametrize("form", ["equals", "linked-home"])
def test_a_moved_away_worker_is_found_whatever_the_spelling_of_its_options(tmp_path: Path, form: str) -> None:
    """The variant tester: a first start with ``--run-id=ID --orch-home=DIR`` (argparse's other spelling), or with
    the orch home through a symbolic link, and its directory removed: a second start spelled the other way found
    no worker and launched a second one. Options are now read as argparse reads them, homes with links resolved."""
    real = tmp_path / "home"
    real.mkdir()
    link = tmp_path / "home-link"
    link.symlink_to(real)
    s = spec("r12", [{"ms": 60000}])
    if form == "equals":
        first = _raw_start("--run-id=r12", f"--orch-home={real}", f"--host={HOST}", spec_json=s)
    else:
        first = _raw_start("--run-id", "r12", "--orch-home", str(link), "--host", HOST, spec_json=s)
    assert first.returncode == 0, first.stdout + first.stderr
    pid = json.loads(first.stdout)["pid"]
    try:
        wait_for(lambda: "case_start" in spool_types(real, "r12"))
        shutil.rmtree(run_dir(real, "r12"))
        dup = _raw_start("--run-id", "r12", "--orch-home", str(real), "--host", HOST, spec_json=s)
        out = json.loads(dup.stdout)
        assert dup.returncode == 2 and out["code"] == "already_running", dup.stdout + dup.stderr
        assert f"kill -TERM -- -{pid}" in out["error"], out
        other = _raw_start("--run-id", "r12", "--orch-home", str(real), "--host", "h2", spec_json=s)
        assert other.returncode == 0, other.stdout + other.stderr  # another host's run directory: its own worker
        os.kill(json.loads(other.stdout)["pid"], signal.SIGKILL)
    finally:
        os.kill(pid, signal.SIGKILL)


def test_a_worker_started_without_host_is_the_default_host_s_not_another_s(tmp_path: Path) -> None:
    """The variant tester: a worker started without ``--host`` (the agent's default: this machine's hostname) whose
    directory was removed made ``start --host b`` refuse, naming b: the missing option matched any host."""
    s = spec("r13", [{"ms": 60000}])
    first = _raw_start("--run-id", "r13", "--orch-home", str(tmp_path), spec_json=s)
    assert first.returncode == 0, first.stdout + first.stderr
    pid = json.loads(first.stdout)["pid"]
    try:
        spool = Path(json.loads(first.stdout)["spool"])
        wait_for(lambda: spool.exists() and b"case_start" in spool.read_bytes())
        shutil.rmtree(spool.parent)
        other = _raw_start("--run-id", "r13", "--orch-home", str(tmp_path), "--host", "b", spec_json=s)
        assert other.returncode == 0, other.stdout + other.stderr
        os.kill(json.loads(other.stdout)["pid"], signal.SIGKILL)
    finally:
        os.kill(pid, signal.SIGKILL)
