"""The agent's reading of a run's pid file (``runs.RunDir.pid_trouble`` and ``status``): a run directory whose
spool is there but whose ``pid`` is missing, empty or garbage (or whose ``pid.start`` is missing while ``pid``
names a live process that is not recognisably the worker) is ``unknown_worker``, named for what it is — never
read as "no such run" (which orch took for "spool gone")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.orch_agent.cli import main
from agents.orch_agent.runs import RunDir, start_time, workers_in


def _run_dir(tmp_path: Path, *, spool: bool = True) -> RunDir:
    path = tmp_path / "runs" / "r1" / "gpu-a"
    path.mkdir(parents=True)
    if spool:
        lines = [{"v": 1, "seq": 0, "type": "hello"}, {"v": 1, "seq": 1, "type": "case_start"}]
        (path / "events.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return RunDir(str(path))


@pytest.fixture
def stranger() -> Iterator[int]:
    """The pid of a live process that is not a worker of any run."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "is missing"),
        ("", "is empty"),
        ("\n  \n", "is empty"),
        ("garbage\n", "holds 'garbage', not a pid"),
        ("-5\n", "holds '-5', not a pid"),
    ],
)
def test_a_pid_file_that_names_no_pid_is_named_and_the_spool_is_still_there(
    tmp_path: Path, content: str | None, said: str
) -> None:
    rd = _run_dir(tmp_path)
    if content is not None:
        Path(rd.pid_path).write_text(content)
    assert rd.pid_trouble() == f"the worker's pid file {rd.pid_path} {said}"
    st = rd.status()
    assert (st["state"], st["lines"], st["pid_trouble"]) == ("unknown_worker", 2, rd.pid_trouble()), st


def test_a_live_pid_without_its_start_file_is_not_taken_for_the_worker(tmp_path: Path, stranger: int) -> None:
    rd = _run_dir(tmp_path)
    Path(rd.pid_path).write_text(f"{stranger}\n")
    trouble = rd.pid_trouble()
    assert trouble is not None and trouble.startswith(f"the worker's start-time file {rd.pid_start_path} is missing")
    assert f"pid {stranger} is a live process" in trouble
    assert rd.status()["state"] == "unknown_worker"
    Path(rd.pid_start_path).write_text(f"{stranger + 1} 12345\n")  # a start file for another pid: the same
    assert rd.status()["state"] == "unknown_worker"


def test_a_readable_pid_file_is_no_trouble(tmp_path: Path, stranger: int) -> None:
    rd = _run_dir(tmp_path)
    done = subprocess.Popen(["true"])
    done.wait()
    Path(rd.pid_path).write_text(f"{done.pid}\n")  # a worker that is gone: dead is a reading, not a trouble
    assert rd.pid_trouble() is None and rd.status()["state"] == "dead"
    Path(rd.pid_path).write_text(f"{stranger}\n")
    Path(rd.pid_start_path).write_text(f"{stranger} 1\n")  # recorded for that pid: a recycled pid, told apart
    assert rd.pid_trouble() is None and rd.status()["state"] == "dead"


def test_no_pid_and_no_spool_is_a_start_that_died_before_launching(tmp_path: Path) -> None:
    rd = _run_dir(tmp_path, spool=False)
    assert rd.status()["state"] == "unknown"  # start launches it now, as before


def _agent_like(cwd: Path, *argv: str, session: bool = True) -> subprocess.Popen[bytes]:
    """A live process working in ``cwd`` whose command line ends with ``argv`` (as an agent command's does), a
    session leader (as every worker is) unless ``session`` is False."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", *argv], cwd=cwd,
                            start_new_session=session)  # fmt: skip


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield started
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


def _wait_cmdline(proc: subprocess.Popen[bytes], word: str) -> None:
    """Until the process's command line is laid out (Popen returns before the exec has finished)."""
    for _ in range(6000):
        with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
            if word.encode() in f.read().split(b"\0"):
                return
        time.sleep(0.01)
    raise AssertionError(f"pid {proc.pid} never showed {word!r} in its command line")


def test_a_live_worker_is_never_called_dead_when_the_pid_files_name_a_gone_one(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    """``pid`` and ``pid.start`` overwritten with a copy of another run's files whose worker is gone, while this
    run's worker works on in the run directory: not ``dead``; ``agent cancel`` writes no ``done``, exit 3, naming the
    live pid."""
    rd = _run_dir(tmp_path)
    gone = subprocess.Popen(["true"])
    gone.wait()
    Path(rd.pid_path).write_text(f"{gone.pid}\n")
    Path(rd.pid_start_path).write_text(f"{gone.pid} 12345\n")
    assert rd.pid_trouble() is None and rd.status()["state"] == "dead"  # no worker here yet: dead is right
    live = _agent_like(Path(rd.path), "start", "--spec", "-", "--run-id", "r1", "--host", "gpu-a")
    procs.append(live)
    _wait_cmdline(live, "--run-id")
    trouble = rd.pid_trouble()
    assert trouble is not None and trouble.startswith(
        f"the worker's pid file {rd.pid_path} names pid {gone.pid}, a process that is gone, but pid {live.pid} is a "
        f"live agent worker of run r1 working in {rd.path}"
    ), trouble
    assert f"kill -TERM -- -{live.pid}" in trouble
    st = rd.status()
    assert (st["state"], st["pid_trouble"]) == ("unknown_worker", trouble), st

    before = Path(rd.spool).read_bytes()
    code = main(["cancel", "r1", "--orch-home", str(tmp_path), "--host", "gpu-a"])
    doc = json.loads(capsys.readouterr().out)
    assert (code, doc["code"]) == (3, "pid_unreadable"), doc
    assert f"but pid {live.pid} is a live agent worker" in doc["error"] and "no done line written" in doc["error"]
    assert Path(rd.spool).read_bytes() == before and not os.path.exists(rd.cancel_path)
    assert live.poll() is None  # nothing was signalled


def test_only_a_session_leader_of_this_run_working_here_counts_as_a_live_worker(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]]
) -> None:
    """Another run's worker command (``--run-id`` another run), a process of the worker's session that leads
    none (the guardian, a command, a bench's rank) and a session leader working elsewhere are not this run's live
    worker: with only those, a gone pid is still ``dead``."""
    rd = _run_dir(tmp_path)
    gone = subprocess.Popen(["true"])
    gone.wait()
    Path(rd.pid_path).write_text(f"{gone.pid}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    procs += [
        _agent_like(Path(rd.path), "start", "--run-id", "r2"),
        _agent_like(Path(rd.path), "start", "--run-id", "r1", session=False),
        _agent_like(elsewhere, "start", "--run-id", "r1"),
        _agent_like(Path(rd.path), "sleep"),
    ]
    for proc, word in zip(procs, ("r2", "r1", "r1", "sleep"), strict=True):
        _wait_cmdline(proc, word)
    assert workers_in(rd.path, "r1") == []
    assert rd.pid_trouble() is None and rd.status()["state"] == "dead"
    procs.append(_agent_like(Path(rd.path), "_worker", rd.path))  # the form slurm-task execs
    _wait_cmdline(procs[-1], "_worker")
    assert workers_in(rd.path, "r1") == [procs[-1].pid]
    assert rd.status()["state"] == "unknown_worker"


def _other_run(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]], path: Path | None = None
) -> tuple[RunDir, subprocess.Popen[bytes]]:
    """Run r0's files in ``path`` (default its own directory for host gpu-a): its spec, a spool without done, and
    a live worker (a session leader working there, recorded in ``pid`` and ``pid.start`` as ``start`` does)."""
    path = path or tmp_path / "runs" / "r0" / "gpu-a"
    path.mkdir(parents=True, exist_ok=True)
    (path / "spec.json").write_text(json.dumps({"run_id": "r0"}))
    (path / "events.jsonl").write_text(json.dumps({"v": 1, "seq": 0, "type": "hello"}) + "\n")
    worker = _agent_like(path, "start", "--run-id", "r0")
    procs.append(worker)
    _wait_cmdline(worker, "r0")
    (path / "pid.start").write_text(f"{worker.pid} {start_time(worker.pid)}\n")
    (path / "pid").write_text(f"{worker.pid}\n")
    return RunDir(str(path)), worker


def _cancel_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], said: str) -> None:
    code = main(["cancel", "r1", "--orch-home", str(tmp_path), "--host", "gpu-a"])
    doc = json.loads(capsys.readouterr().out)
    assert (code, doc["code"]) == (3, "not_this_run"), doc
    assert doc["error"] == f"{said}; nothing was signalled or written", doc
    assert doc["path"] == str(tmp_path / "runs" / "r1" / "gpu-a")


@pytest.mark.parametrize("linked", ["host", "run"])
def test_a_run_directory_that_is_a_link_to_another_runs_is_refused(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]], capsys: pytest.CaptureFixture[str], linked: str
) -> None:
    """``runs/r1/gpu-a`` (or ``runs/r1``) a symbolic link to run r0's: ``agent cancel r1`` stopped r0's worker and
    wrote ``done`` into r0's spool; ``status`` and ``follow`` read r0's spool as r1's. Now the directory is named,
    exit 3 ``not_this_run``, and nothing of r0's is signalled, written or read."""
    a, worker = _other_run(tmp_path, procs)
    before = Path(a.spool).read_bytes()
    link = tmp_path / "runs" / "r1" / "gpu-a"
    if linked == "host":
        link.parent.mkdir(parents=True)
        link.symlink_to(a.path)
    else:
        link.parent.symlink_to(Path(a.path).parent)
    rd = RunDir(str(link))
    said = (f"the run directory {link if linked == 'host' else link.parent} is a symbolic link (to "
            f"{a.path if linked == 'host' else Path(a.path).parent}), not run r1's own directory: it may hold another "
            "run's worker and spool")  # fmt: skip
    _cancel_refused(tmp_path, capsys, said)
    assert rd.not_this_run() == said
    st = rd.status()
    assert (st["state"], st["pid"], st["lines"], st["pid_trouble"]) == ("unknown_worker", None, 0, said), st
    assert main(["follow", "r1", "--orch-home", str(tmp_path), "--host", "gpu-a"]) == 3
    out = capsys.readouterr()
    assert out.out == "" and json.loads(out.err)["code"] == "not_this_run"  # not one of r0's lines
    assert worker.poll() is None and Path(a.spool).read_bytes() == before and not os.path.exists(a.cancel_path)


def test_a_run_directory_holding_another_runs_spec_is_refused(
    tmp_path: Path, procs: list[subprocess.Popen[bytes]], capsys: pytest.CaptureFixture[str]
) -> None:
    """What a bind mount of run r0's directory onto r1's shows: a real directory, no link, holding r0's files (its
    spec, its pid files) and r0's live worker working in it. ``agent cancel r1`` stopped that worker and wrote
    ``done``; now it refuses, naming the directory and the run it holds."""
    rd = RunDir(str(tmp_path / "runs" / "r1" / "gpu-a"))
    _, worker = _other_run(tmp_path, procs, Path(rd.path))
    said = (f"the run directory {rd.path} holds the files of run 'r0' ({rd.spec_path} names run 'r0', not 'r1'): "
            "another run's directory, linked or mounted here")  # fmt: skip
    _cancel_refused(tmp_path, capsys, said)
    assert rd.not_this_run() == said and rd.status()["state"] == "unknown_worker"
    assert "done" not in Path(rd.spool).read_text() and not os.path.exists(rd.cancel_path)
    Path(rd.spec_path).write_text(json.dumps({"run_id": "r1"}))  # its own spec: proved, no trouble
    assert rd.not_this_run() is None
    os.unlink(rd.spec_path)  # no spec yet (a start that died before writing it): nothing says otherwise
    assert rd.not_this_run() is None
    (tmp_path / "spec-r1.json").write_text(json.dumps({"run_id": "r1"}))
    os.symlink(tmp_path / "spec-r1.json", rd.spec_path)  # even one naming r1: a link proves nothing
    assert rd.not_this_run() == (f"the run's spec {rd.spec_path} is a symbolic link: {rd.path} is not proved to be "
                                 "run r1's own directory")  # fmt: skip
    assert worker.poll() is None
