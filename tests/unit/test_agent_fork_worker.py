"""``agent start`` forks its worker instead of starting a second interpreter: the worker is detached (its own
session and group, nothing of ``start`` held open), and it is told apart from a recycled pid by its start time
(``pid.start``), since its command line is ``start``'s. Real processes, a temporary orch home."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from agents.orch_agent.runs import pid_alive, session_members, start_time
from tests.unit.test_agent_cli import agent, home, run_dir, spec, spool_types, wait_for

__all__ = ["home"]  # the fixture, shared with test_agent_cli


def _fds(pid: int) -> dict[int, str]:
    d = Path(f"/proc/{pid}/fd")
    out = {}
    for p in d.iterdir():
        try:
            out[int(p.name)] = os.readlink(p)
        except OSError:
            continue
    return out


def test_the_worker_is_forked_detached_and_holds_nothing_of_start(home: Path) -> None:
    out = agent(home, "start", "--spec", "-", "--run-id", "f1", input=spec("f1", [{"ms": 60000}]))
    assert out.returncode == 0, out.stdout + out.stderr
    pid = json.loads(out.stdout)["pid"]
    rd = run_dir(home, "f1")
    try:
        wait_for(lambda: "case_start" in spool_types(home, "f1"))
        assert (rd / "pid").read_text() == f"{pid}\n"
        assert (rd / "pid.start").read_text() == f"{pid} {start_time(pid)}\n"
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        assert b"start" in cmdline and b"_worker" not in cmdline  # start's own command line: forked, not exec'd
        assert cmdline[cmdline.index(b"--run-id") + 1] == b"f1"  # what ps and pgrep show of the run
        assert os.getsid(pid) == pid and os.getpgid(pid) == pid
        fds = _fds(pid)
        assert fds[0] == "/dev/null"
        assert fds[1] == fds[2] == str(rd / "worker.log")
        held = {fd: target for fd, target in fds.items() if fd > 2}
        # the spool and the guardian's pipe (reaper.py): the guardian holds the other end; start's stdin/stdout
        # pipes, its socket or its start.lock would show up here
        guardian = [m for m, pgid in session_members(pid) if pgid != pid]
        assert len(guardian) == 1
        pipes = {t for t in held.values() if t.startswith("pipe:")}
        assert len(pipes) == 1 and pipes <= set(_fds(guardian[0]).values()), held
        assert sorted(t for t in held.values() if not t.startswith("pipe:")) == [str(rd / "events.jsonl")], held
        assert json.loads(agent(home, "status", "f1").stdout)["state"] == "running"
        res = json.loads(agent(home, "cancel", "f1").stdout)
        assert res == {"run_id": "f1", "was_running": True, "killed": False}
        wait_for(lambda: not pid_alive(pid))
        done = json.loads((rd / "events.jsonl").read_text().splitlines()[-1])
        assert (done["type"], done["status"]) == ("done", "cancelled")
    finally:
        if pid_alive(pid):
            os.killpg(pid, signal.SIGKILL)


def test_a_run_id_in_argv_that_is_not_the_specs_is_refused(home: Path) -> None:
    out = agent(home, "start", "--spec", "-", "--run-id", "other", input=spec("f2", [{"ms": 1}]))
    assert out.returncode == 2
    assert json.loads(out.stdout) == {"error": "--run-id 'other' is not the spec's run id 'f2'", "code": "usage"}
    assert not run_dir(home, "f2").exists()


def test_a_recycled_pid_is_not_taken_for_the_worker_and_is_left_alone(home: Path) -> None:
    rd = run_dir(home, "recycled")
    rd.mkdir(parents=True)
    (rd / "events.jsonl").write_text('{"v":1,"seq":0,"type":"hello","ts":1}\n')
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True,
                             cwd=rd)  # working in the run directory, as a worker does  # fmt: skip
    try:
        started = start_time(other.pid)
        assert started is not None
        (rd / "pid.start").write_text(f"{other.pid} {started - 1}\n")  # the worker that had this pid, long gone
        (rd / "pid").write_text(f"{other.pid}\n")
        assert json.loads(agent(home, "status", "recycled").stdout)["state"] == "dead"
        fol = agent(home, "follow", "recycled", "--from", "0")
        assert fol.returncode == 3 and json.loads(fol.stderr)["code"] == "worker_dead"
        res = json.loads(agent(home, "cancel", "recycled", "--grace-s", "0.5").stdout)
        assert res == {"run_id": "recycled", "was_running": False, "killed": False}
        assert other.poll() is None  # someone else's process: never signalled
        # the same pid with its real start time is the worker
        (rd / "pid.start").write_text(f"{other.pid} {started}\n")
        (rd / "events.jsonl").write_text('{"v":1,"seq":0,"type":"hello","ts":1}\n')
        assert json.loads(agent(home, "status", "recycled").stdout)["state"] == "running"
    finally:
        other.kill()
        other.wait()
