"""The agent never signals a process it has not proved to be this run's worker (issue 10's pid-file findings):

- a ``pid``/``pid.start`` that are symbolic links to another run's files named that run's worker, and ``agent
  cancel`` SIGTERMed it (the other run ended partial, this one's worker ran on): links are never followed, and a
  live process is this run's worker only when it works in this run directory (copies of the other run's files
  name a process that does not);
- a pid beyond a C long crashed ``cancel``, ``status`` and ``follow`` with an OverflowError traceback;
- pid 0 made ``agent cancel`` SIGTERM its own process group (``kill(0, ...)``/``killpg(0, ...)`` are the caller's
  group), and ``pid_alive(0)`` was true.

Real processes: real workers started by ``agent start``, ``agent`` commands as subprocesses, a temporary home."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.orch_agent import reaper, runs
from agents.orch_agent.runs import RunDir, pid_alive, start_time
from tests.unit.test_agent_cli import HOST, ROOT, agent, run_dir, spec, spool_types, wait_for


@pytest.fixture
def workers() -> Iterator[list[int]]:
    """Pids of the workers a test started; each one's session is SIGKILLed at the end, whatever happened."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if pid_alive(pid):
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _start(home: Path, run_id: str, workers: list[int]) -> int:
    """A real run with a worker sleeping through one long case; its pid once its hello is in the spool."""
    out = agent(home, "start", "--spec", "-", "--run-id", run_id, input=spec(run_id, [{"ms": 600000}]))
    assert out.returncode == 0, out.stdout + out.stderr
    pid = int(json.loads(out.stdout)["pid"])
    workers.append(pid)
    wait_for(lambda: "case_start" in spool_types(home, run_id), timeout=60)
    return pid


def _error(res: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert "Traceback" not in res.stderr, res.stderr
    doc = json.loads(res.stderr.strip().splitlines()[-1] if res.stderr.strip() else res.stdout)  # follow: stderr
    assert isinstance(doc, dict)
    return doc


@pytest.mark.parametrize("how", ["symlink", "copy"])
def test_pid_files_taken_from_another_run_never_get_that_runs_worker_signalled(
    tmp_path: Path, workers: list[int], how: str
) -> None:
    home = tmp_path / "orch"
    a_pid = _start(home, "run-a", workers)
    b_pid = _start(home, "run-b", workers)
    a, b = run_dir(home, "run-a"), run_dir(home, "run-b")
    for name in ("pid", "pid.start"):
        (b / name).unlink()
        if how == "symlink":
            (b / name).symlink_to(a / name)
        else:
            shutil.copyfile(a / name, b / name)
    rd = RunDir(str(b))
    if how == "symlink":
        assert rd.pid() is None
        assert rd.pid_trouble() == f"the worker's pid file {b / 'pid'} is a symbolic link"
    else:
        assert rd.pid() == a_pid
        assert rd.pid_trouble() == (
            f"the worker's pid file {b / 'pid'} names pid {a_pid}, a live process started when {b / 'pid.start'} "
            f"says, but it is not this run's worker (its working directory is not {b}): another run's worker"
        )
    start = start_time(a_pid)
    assert runs.is_worker(a_pid, str(a), start) and not runs.is_worker(a_pid, str(b), start)
    assert rd.status()["state"] == "unknown_worker"

    res = agent(home, "cancel", "run-b", "--grace-s", "2")
    err = _error(res)
    assert res.returncode == 3 and err["code"] == "pid_unreadable" and err["path"] == str(b / "pid"), err
    assert str(err["error"]).startswith(rd.pid_trouble() or "?"), err
    assert pid_alive(a_pid) and pid_alive(b_pid)  # A's worker untouched; B's is not named, so not stopped either
    assert not (a / "cancel").exists() and spool_types(home, "run-a")[-1] == "case_start"
    assert "done" not in spool_types(home, "run-b")  # no done while B's worker may write
    st = json.loads(agent(home, "status", "run-a").stdout)
    assert st["state"] == "running", st


@pytest.mark.parametrize("text", ["99999999999999999999", "0", "4194304"])
def test_a_pid_no_kernel_hands_out_is_not_a_pid_and_crashes_nothing(tmp_path: Path, text: str) -> None:
    home = tmp_path / "orch"
    d = run_dir(home, "big")
    d.mkdir(parents=True)
    (d / "events.jsonl").write_text('{"v":1,"seq":0,"type":"hello","ts":1}\n')
    (d / "pid").write_text(text + "\n")
    rd = RunDir(str(d))
    assert rd.pid() is None
    assert rd.pid_trouble() == f"the worker's pid file {d / 'pid'} holds {text!r}, not a pid"
    st = json.loads(agent(home, "status", "big").stdout)
    assert (st["state"], st["pid"], st["pid_trouble"]) == ("unknown_worker", None, rd.pid_trouble()), st
    for args in (("cancel", "big"), ("follow", "big", "--from", "0")):
        res = agent(home, *args)
        err = _error(res)
        assert (res.returncode, err["code"], err["path"]) == (3, "pid_unreadable", str(d / "pid")), (args, err)
    assert (d / "events.jsonl").read_text().count("\n") == 1


def test_pid_max_bounds_a_pid() -> None:
    top = runs.pid_max()
    assert 0 < top <= runs.PID_MAX_LIMIT
    assert runs.parse_pid(f"{top - 1}\n") == top - 1 and runs.parse_pid(str(top)) is None
    assert runs.parse_pid(" 1 ") == 1 and runs.parse_pid(b"7\n") == 7
    for text in ("", "0", "00", "-1", "+5", "1e3", "٣", str(2**63), "99999999999999999999"):
        assert runs.parse_pid(text) is None, text


def test_pid_zero_in_a_run_without_a_spool_is_never_signalled(tmp_path: Path) -> None:
    """``agent cancel`` in a run directory with no events.jsonl and ``pid`` 0, in its own session (as the tester ran
    it under setsid): it used to SIGTERM its own group and die of it (exit 143)."""
    home = tmp_path / "orch"
    d = run_dir(home, "zero")
    d.mkdir(parents=True)
    (d / "pid").write_text("0\n")
    res = subprocess.run(
        [sys.executable, "-m", "agents.orch_agent", "cancel", "zero", "--orch-home", str(home), "--host", HOST,
         "--grace-s", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, start_new_session=True,
    )  # fmt: skip
    err = _error(res)
    assert res.returncode == 3 and err["code"] == "pid_unreadable", (res.returncode, err)
    assert err["error"] == (
        f"the worker's pid file {d / 'pid'} holds '0', not a pid: the worker's state is unknown; "
        f"the run has no spool {d / 'events.jsonl'} yet (not stopped, no done line written)"
    )
    assert not (d / "events.jsonl").exists()
    (d / "pid").unlink()  # no pid file and no spool: a start that died before launching; cancel ends it
    res = agent(home, "cancel", "zero")
    assert res.returncode == 0 and json.loads(res.stdout)["was_running"] is False, res.stdout + res.stderr
    assert spool_types(home, "zero") == ["done"]


@pytest.mark.parametrize(
    "pid", [0, -1, -os.getpid(), 2**63, 2**70], ids=["0", "-1", "minus-own-pid", "2**63", "2**70"]
)  # ids that are the same in every process: pytest-xdist's workers must collect the same names
def test_no_pid_outside_the_kernels_range_is_probed_or_signalled(pid: int) -> None:
    assert not runs.valid_pid(pid)
    assert not pid_alive(pid) and not runs.group_alive(pid) and runs.session_members(pid) == []
    assert not runs.is_worker(pid, "/") and not runs.stopped(pid) and start_time(pid) is None
    assert reaper.kill_session(pid, deadline_s=1.0) == 0  # still here: our own group was not signalled


def test_the_guardian_is_not_started_outside_the_workers_own_session() -> None:
    """Its end SIGKILLs the session it was started in: never one the worker does not lead (pytest's here)."""
    assert os.getsid(0) != os.getpid()
    assert reaper.start_guardian() is None


def test_a_pid_file_that_is_no_regular_file_or_a_start_file_that_is_a_link_is_named(tmp_path: Path) -> None:
    """A FIFO is refused, not waited on (``O_NONBLOCK``); a ``pid.start`` link is never read either."""
    d = run_dir(tmp_path / "orch", "odd")
    d.mkdir(parents=True)
    (d / "events.jsonl").write_text('{"v":1,"seq":0,"type":"hello","ts":1}\n')
    os.mkfifo(d / "pid")
    rd = RunDir(str(d))
    assert rd.pid() is None and rd.pid_trouble() == f"the worker's pid file {d / 'pid'} is not a regular file"
    assert rd.status()["state"] == "unknown_worker"
    (d / "pid").unlink()
    (d / "pid").write_text(f"{os.getpid()}\n")
    (d / "pid.start").symlink_to(tmp_path / "elsewhere")
    assert rd.pid_trouble() == f"the worker's start-time file {d / 'pid.start'} is a symbolic link"
    assert rd.status()["state"] == "unknown_worker"


def test_a_worker_on_its_way_out_is_read_as_ending_not_as_another_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                        ) -> None:  # fmt: skip
    """A SIGKILLed worker releases its working directory in ``do_exit`` before it is a zombie: in that window (a
    loaded machine widens it; seen once in an e2e run at load 6) its pid file named "a live process started when
    pid.start says, but not this run's worker", and the follower reported the dead worker as a pid-file trouble
    instead of "exited without finishing". A process with ``PF_EXITING`` is read as ending. The process here is
    this test's own (alive, started when its pid.start says, working elsewhere); ``exiting`` is the kernel's word,
    stood in for."""
    d = tmp_path / "orch" / "runs" / "r1" / HOST
    d.mkdir(parents=True)
    me = os.getpid()
    (d / "pid").write_text(f"{me}\n")
    (d / "pid.start").write_text(f"{me} {start_time(me)}\n")
    rd = RunDir(str(d))
    assert rd.pid_trouble() == (
        f"the worker's pid file {d / 'pid'} names pid {me}, a live process started when {d / 'pid.start'} says, but "
        f"it is not this run's worker (its working directory is not {d}): another run's worker"
    )
    monkeypatch.setattr(runs, "exiting", lambda pid: pid == me)
    assert rd.pid_trouble() is None  # ending, and no other worker of the run works there: a dead worker's reading


def test_exiting_reads_the_kernels_flag() -> None:
    assert runs.exiting(os.getpid()) is False  # running
    assert runs.exiting(2**22 + 12345) is False  # no such process: not readable
