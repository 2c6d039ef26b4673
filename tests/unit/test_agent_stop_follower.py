"""``agent follow --heartbeat-s`` and ``agent stop-follower``, as orch drives them: real agent processes, a
temporary orch home, the ``sleep`` bench. A follower names its pid in its heartbeats; stop-follower kills that
follower (stopped or not) and refuses every other process — above all the run's worker, which is forked from
``start`` and keeps its command line (``--follow``, ``--run-id``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from agents.orch_agent.runs import pid_alive
from orchestrator.transport.liveness import parse_heartbeat
from tests.unit.test_agent_cli import HOST, ROOT, agent, home, spec  # noqa: F401 - home is a fixture


def test_a_follower_beats_with_its_pid_and_stop_follower_kills_only_it(home: Path) -> None:  # noqa: F811
    s = spec("sf1", [{"ms": 60000}])
    started = subprocess.run(
        [sys.executable, "-m", "agents.orch_agent", "start", "--spec", "-", "--orch-home", str(home), "--host", HOST],
        cwd=ROOT, input=s, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert started.returncode == 0, started.stdout + started.stderr
    worker = json.loads(started.stdout)["pid"]
    fol = subprocess.Popen(
        [sys.executable, "-m", "agents.orch_agent", "follow", "sf1", "--heartbeat-s", "0.2",
         "--orch-home", str(home), "--host", HOST],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    other = subprocess.Popen(["sleep", "300"])
    try:
        assert fol.stderr is not None
        beats = [parse_heartbeat(fol.stderr.readline().rstrip(b"\n")) for _ in range(3)]
        assert beats == [(True, fol.pid)] * 3, beats
        os.kill(fol.pid, signal.SIGSTOP)
        for pid in (worker, other.pid, 1, 999_999_999):
            res = agent(home, "stop-follower", "sf1", "--pid", str(pid))
            assert res.returncode == 0 and json.loads(res.stdout)["killed"] is False, (pid, res.stdout, res.stderr)
        assert pid_alive(worker) and other.poll() is None
        res = agent(home, "stop-follower", "sf1", "--pid", str(fol.pid))
        assert json.loads(res.stdout) == {"run_id": "sf1", "pid": fol.pid, "killed": True}
        assert fol.wait(timeout=30) == -signal.SIGKILL
        assert pid_alive(worker)  # the worker runs on
        missing = agent(home, "stop-follower", "nope", "--pid", str(worker))
        assert missing.returncode == 4 and json.loads(missing.stdout)["code"] == "no_such_run"
    finally:
        for p in (fol, other):
            if p.poll() is None:
                p.kill()
                p.wait()
        if fol.stderr is not None:
            fol.stderr.close()
        agent(home, "cancel", "sf1", "--grace-s", "1")
