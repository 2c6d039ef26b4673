"""``runs.is_worker`` right after ``Popen``: ``start --follow`` judges the worker it has just launched, while the
kernel may not yet have laid out the new program's command line (found when start and follow were merged: one
run in a few on a loaded machine was judged "worker exited without finishing" before its first line)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agents.orch_agent import runs


def test_a_worker_just_launched_is_alive_at_once(tmp_path: Path) -> None:
    run_dir = str(tmp_path)  # a worker works in its run directory (slurm-task changes there before its exec)
    for _ in range(30):
        proc = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(30)", "_worker", run_dir],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, close_fds=True, start_new_session=True, cwd=run_dir,
        )  # fmt: skip
        try:
            assert runs.is_worker(proc.pid, run_dir)
        finally:
            proc.kill()
            proc.wait()


def _fake_proc(monkeypatch: pytest.MonkeyPatch, cmdline: bytes, flags: int) -> None:
    real_open = open

    def fake_open(path: str, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if path == f"/proc/{os.getpid()}/cmdline":
            return io.BytesIO(cmdline)
        if path == f"/proc/{os.getpid()}/stat":
            return io.StringIO(f"{os.getpid()} (python) S 1 1 1 0 -1 {flags} 0 0 0 0")
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(runs, "open", fake_open, raising=False)


def test_an_empty_command_line_is_a_process_inside_exec_but_not_a_kernel_thread(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    run = tmp_path / "run" / "dir"
    run.mkdir(parents=True)
    monkeypatch.chdir(run)  # this process stands for the worker: it works in its run directory
    _fake_proc(monkeypatch, b"", 0x400040)
    assert runs.is_worker(os.getpid(), str(run))
    _fake_proc(monkeypatch, b"", 0x400040 | runs.PF_KTHREAD)
    assert not runs.is_worker(os.getpid(), str(run))
    _fake_proc(monkeypatch, b"python\0other.py\0", 0x400040)  # a recycled pid running something else
    assert not runs.is_worker(os.getpid(), str(run))
    _fake_proc(monkeypatch, b"python\0agent.pyz\0_worker\0" + bytes(run) + b"\0", 0x400040)
    assert runs.is_worker(os.getpid(), str(run))
    monkeypatch.chdir(tmp_path)  # the same process working elsewhere: another run's worker, not this one's
    assert not runs.is_worker(os.getpid(), str(run))
