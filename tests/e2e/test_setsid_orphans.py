"""Commands that leave the worker's session (``setsid`` in the command, a fork/setsid/fork daemon), over real
sshd: a SIGKILLed worker (the guardian) and ``orch cancel`` leave no benchmark process behind — the run cookie
(agents/orch_agent/reaper.py) follows them. Adapted from the variants16 orphan tests."""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_host_side import _latest_run_id, _orch, _pgrep, _run_dir, _wait
from tests.plugins.sshd import SshdBed

pytestmark = [pytest.mark.sshd]

DAEMON = """\
import os, sys, time
secs = sys.argv[1]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execvp("sleep", ["sleep", secs])
    os._exit(0)
os.wait()
time.sleep(float(secs))
"""


def _suite(tmp_path: Path, command: str) -> Path:
    d = tmp_path / "suites"
    d.mkdir(exist_ok=True)
    (d / "spawner.yaml").write_text(f"""\
name: spawner
description: a command that leaves processes behind in some way
command: {command}
params:
  secs: {{type: str, default: "1", help: "seconds"}}
  n: {{type: list, default: [1, 2], help: "cases"}}
parser: {{name: regex, pattern: 'tput: (?P<tput>\\d+)'}}
metrics:
  tput: {{path: tput, unit: tok/s}}
warmup: 0
repeat: 1
timeout_s: 900
""")
    return d


COMMANDS = {
    # setsid(1) inside the command
    "setsid-in-command": '["sh", "-c", "setsid sleep {secs} & sleep {secs}; echo tput: 1"]',
    # classic daemon: fork, setsid, fork
    "python-daemonize": None,
}


def _command(tmp_path: Path, kind: str) -> str:
    cmd = COMMANDS[kind]
    if cmd is None:
        script = tmp_path / "daemon.py"
        script.write_text(DAEMON)
        cmd = f'["{sys.executable}", "{script}", "{{secs}}"]'
    return cmd


def _start(sshd_bed: SshdBed, tmp_path: Path, kind: str) -> tuple[Any, Any, str, str, Any]:
    host = sshd_bed.add("gpu-a")
    orch = _orch(tmp_path, [(host, {})])
    suites = _suite(tmp_path, _command(tmp_path, kind))
    secs = f"{600 + random.random() * 100:.4f}"
    proc = orch.popen("run", "spawner", "--hosts", "gpu-a", "--suite-dir", str(suites), "--set", f"secs={secs}",
                      "--json")  # fmt: skip
    want = 1 if kind == "python-daemonize" else 2  # the daemon script's own argv does not say `sleep`
    _wait(lambda: len(_pgrep(f"sleep {secs}")) >= want, "the command and its leftover child", timeout=180)
    run_id = _latest_run_id(orch)
    assert run_id
    return host, orch, secs, run_id, proc


def _cleanup(secs: str, proc: Any) -> list[str]:
    left = _pgrep(f"sleep {secs}")
    for line in left:  # our own test's sleeps only (the random secs names them)
        pid = int(line.split()[0])
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if proc.poll() is None:
        proc.kill()
        proc.communicate()
    return left


@pytest.mark.parametrize("kind", list(COMMANDS))
def test_setsid_sigkilled_worker_leaves_no_benchmark_process(sshd_bed: SshdBed, tmp_path: Path, kind: str) -> None:
    """The command leaves the worker's session by setsid(1) or a full daemonize (fork/setsid/fork); the worker is
    SIGKILLed. Promised: no benchmark process left behind (the guardian follows the run cookie)."""
    host, orch, secs, run_id, proc = _start(sshd_bed, tmp_path, kind)
    try:
        worker = int((_run_dir(host.home, run_id, "gpu-a") / "pid").read_text())
        os.kill(worker, signal.SIGKILL)
        proc.communicate(timeout=240)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _pgrep(f"sleep {secs}"):
            time.sleep(0.5)
    finally:
        left = _cleanup(secs, proc)
    assert left == [], f"{kind}: processes left after SIGKILL of the worker: {left}"


@pytest.mark.parametrize("kind", list(COMMANDS))
def test_setsid_cancel_leaves_no_benchmark_process(sshd_bed: SshdBed, tmp_path: Path, kind: str) -> None:
    """``orch cancel`` of a run whose command called setsid or daemonized. Promised: no benchmark process left
    behind (the worker's own cleanup and ``agent cancel`` follow the run cookie)."""
    _host, orch, secs, run_id, proc = _start(sshd_bed, tmp_path, kind)
    try:
        res = orch("cancel", run_id, "--json")
        assert res.returncode == 0, res.stderr
        proc.communicate(timeout=240)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and _pgrep(f"sleep {secs}"):
            time.sleep(0.5)
    finally:
        left = _cleanup(secs, proc)
    assert left == [], f"{kind}: processes left after cancel: {left}"
