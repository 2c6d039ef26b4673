"""The run cookie (reaper.py): processes that left the worker's session with ``setsid`` (``setsid sleep``, a
fork/setsid/fork daemon) still carry ``ORCH_RUN_COOKIE`` and are found and killed by it; a process with another
cookie or none is never signalled. Real processes, spawned with subprocess."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.orch_agent import reaper

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/PID/environ is Linux's")

DAEMON = """\
import os, sys, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", sys.argv[1]])
    os._exit(0)
os.wait()
"""


def _pids(secs: str) -> list[int]:
    """Live (non-zombie) pids whose command line is ``sleep SECS``."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if argv[:2] == [b"sleep", secs.encode()] and state != "Z":
            out.append(int(name))
    return out


def _wait_for(pred, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.fixture
def secs() -> Iterator[str]:
    s = f"{600 + random.random() * 100:.4f}"
    yield s
    for pid in _pids(s):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _env(cookie: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != reaper.COOKIE_ENV}
    if cookie is not None:
        env[reaper.COOKIE_ENV] = cookie
    return env


def _setsid_sleep(secs: str, cookie: str | None) -> None:
    """``sh -c 'setsid sleep SECS &'``: the shell exits at once, the sleep lives on in its own session."""
    subprocess.run(["sh", "-c", f"setsid sleep {secs} >/dev/null 2>&1 </dev/null &"], env=_env(cookie), check=True)


def test_setsid_sleep_is_found_and_killed(secs: str) -> None:
    cookie = reaper.make_cookie("run-1", "gpu-a")
    _setsid_sleep(secs, cookie)
    _wait_for(lambda: len(_pids(secs)) == 1)
    (pid,) = _pids(secs)
    assert os.getsid(pid) != os.getsid(0)  # out of our session: kill_session would not reach it
    assert reaper.cookie_members(cookie) == [pid]
    assert reaper.kill_cookie(cookie, deadline_s=5.0) == 1
    _wait_for(lambda: not _pids(secs))
    assert reaper.cookie_members(cookie) == []


def test_double_fork_daemon_is_killed(secs: str, tmp_path: Path) -> None:
    cookie = reaper.make_cookie("run-1", "gpu-a")
    script = tmp_path / "daemon.py"
    script.write_text(DAEMON)
    subprocess.run([sys.executable, str(script), secs], env=_env(cookie), check=True)
    _wait_for(lambda: len(_pids(secs)) == 1)
    assert reaper.kill_cookie(cookie, deadline_s=5.0) >= 1
    _wait_for(lambda: not _pids(secs))


def test_sigterm_first_with_a_grace(secs: str) -> None:
    """With a grace, SIGTERM goes first: a process that handles it exits by it (and is gone before SIGKILL)."""
    cookie = reaper.make_cookie("run-1", "gpu-a")
    _setsid_sleep(secs, cookie)
    _wait_for(lambda: len(_pids(secs)) == 1)
    t0 = time.monotonic()
    assert reaper.kill_cookie(cookie, grace_s=5.0, deadline_s=5.0) == 1
    assert time.monotonic() - t0 < 4.0  # sleep dies of SIGTERM: the grace is not waited out
    _wait_for(lambda: not _pids(secs))


def test_sigterm_ignored_then_sigkill(tmp_path: Path) -> None:
    cookie = reaper.make_cookie("run-1", "gpu-a")
    marker = f"{random.random():.10f}"
    code = f"import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)  # {marker}"
    proc = subprocess.Popen([sys.executable, "-c", code], env=_env(cookie), start_new_session=True)
    try:
        _wait_for(lambda: proc.pid in reaper.cookie_members(cookie))
        time.sleep(0.3)  # the handler is set
        assert reaper.kill_cookie(cookie, grace_s=0.5, deadline_s=5.0) == 1
        assert proc.wait(timeout=5) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_other_cookie_and_no_cookie_survive(secs: str) -> None:
    mine = reaper.make_cookie("run-1", "gpu-a")
    other = reaper.make_cookie("run-1", "gpu-a")  # same run and host, another worker
    _setsid_sleep(secs, mine)
    _setsid_sleep(secs, other)
    _setsid_sleep(secs, None)
    _setsid_sleep(secs, mine + "x")  # a prefix of another value is not the cookie
    _wait_for(lambda: len(_pids(secs)) == 4)
    others = set(reaper.cookie_members(other))
    assert len(others) == 1
    assert reaper.kill_cookie(mine, deadline_s=5.0) == 1
    _wait_for(lambda: len(_pids(secs)) == 3)
    time.sleep(0.2)
    assert len(_pids(secs)) == 3 and others <= set(_pids(secs))


def test_never_signals_itself_pid_1_or_excluded() -> None:
    cookie = reaper.make_cookie("run-1", "gpu-a")
    assert reaper.cookie_members("") == []
    assert reaper.kill_cookie(None) == 0
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env=_env(cookie))
    try:
        _wait_for(lambda: proc.pid in reaper.cookie_members(cookie))
        assert reaper.kill_cookie(cookie, exclude=(proc.pid,), deadline_s=1.0) == 0
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_cookie_file_round_trip(tmp_path: Path) -> None:
    cookie = reaper.make_cookie("run-1", "gpu-a")
    assert reaper.valid_cookie(cookie, "run-1", "gpu-a")
    assert not reaper.valid_cookie(cookie, "run-2", "gpu-a")
    assert reaper.read_cookie(str(tmp_path), "run-1", "gpu-a") is None
    reaper.write_cookie(str(tmp_path), cookie)
    assert (tmp_path / "cookie").stat().st_mode & 0o777 == 0o600
    assert reaper.read_cookie(str(tmp_path), "run-1", "gpu-a") == cookie
    assert reaper.read_cookie(str(tmp_path), "run-1", "gpu-b") is None  # another host's cookie is not this one's
    (tmp_path / "cookie").unlink()
    (tmp_path / "real").write_text(cookie)
    (tmp_path / "cookie").symlink_to(tmp_path / "real")
    assert reaper.read_cookie(str(tmp_path), "run-1", "gpu-a") is None  # a link is never followed
