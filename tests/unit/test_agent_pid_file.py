"""The agent's reading of a run's pid file (``runs.RunDir.pid_trouble`` and ``status``): a run directory whose
spool is there but whose ``pid`` is missing, empty or garbage (or whose ``pid.start`` is missing while ``pid``
names a live process that is not recognisably the worker) is ``unknown_worker``, named for what it is — never
read as "no such run" (which orch took for "spool gone")."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.orch_agent.runs import RunDir


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
