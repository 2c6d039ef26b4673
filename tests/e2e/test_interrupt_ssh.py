"""Ctrl-C pressed again while ``orch run`` is already cancelling (issue 10/21 trial: a second SIGINT printed
"Task was destroyed but it is pending!" and a KeyboardInterrupt traceback, the agents ran on to ``done`` and the
store kept the run ``running``), over real sshd with the real CLI as a subprocess.

SIGINT goes to orch's whole process group, as a terminal's Ctrl-C and ``timeout -s INT`` send it, so whatever orch
has started locally (``ssh -G``, parse workers) is hit too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from typing import Any

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.e2e.test_run_ssh import MANY_CASES, _agent_procs, _first_result, _kill_agents
from tests.plugins.timing import scaled, wait_for

pytestmark = [pytest.mark.sshd, pytest.mark.torch]


def _start(orch: Orch, store: Store) -> tuple[subprocess.Popen[str], str]:
    """``orch run`` in its own process group (as a shell starts a job), once a result is stored and an agent
    worker runs on each host."""
    argv = orch.argv("run", "moe-sweep", "--hosts", "ct200,b300", "--preset", "tiny", "--timeout", str(scaled(30)),
                     *MANY_CASES)  # fmt: skip
    proc = subprocess.Popen(argv, cwd=orch.cwd, env=orch.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        run_id = wait_for(lambda: _first_result(store) or proc.poll() is not None, timeout_s=180,
                          what="a first stored result")  # fmt: skip
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert isinstance(run_id, str)
        wait_for(lambda: len(_agent_procs(run_id)) >= 2, timeout_s=60, what="an agent worker on each host")
    except BaseException:
        _stop(proc)
        raise
    return proc, run_id


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()


def _interrupt(proc: subprocess.Popen[str], times: int, gap_s: float) -> None:
    for i in range(times):
        if i:
            time.sleep(gap_s)
        os.killpg(proc.pid, signal.SIGINT)


@pytest.mark.parametrize("gap_s", [0.0, 0.5])
def test_second_ctrl_c_during_the_cancel_is_absorbed(two_hosts: tuple[Orch, list[Any]], gap_s: float) -> None:
    orch, _ = two_hosts
    store = Store.from_url(orch.db_url)
    proc, run_id = _start(orch, store)
    try:
        _interrupt(proc, 2, gap_s)
        _, err = proc.communicate(timeout=scaled(180))
    finally:
        _stop(proc)
    try:
        assert proc.returncode == 130, err[-3000:]
        assert "Traceback" not in err and "Task was destroyed" not in err and "KeyboardInterrupt" not in err, err
        assert f"interrupted: run {run_id[-8:]} cancelled on its hosts" in " ".join(err.split()), err
        wait_for(lambda: not _agent_procs(run_id), timeout_s=60, what="the remote agents to stop")
    finally:
        _kill_agents(run_id)
    detail = store.get_run(run_id)
    assert detail.status == "cancelled"
    assert [(h.host, h.status, h.error) for h in detail.host_runs] == [
        ("gpu-a", "cancelled", "cancelled by the user"), ("gpu-b", "cancelled", "cancelled by the user")]
    assert detail.results >= 1 and detail.results == store.results(run_id, limit=1).total
    store.close()


def test_a_third_ctrl_c_stops_waiting_and_the_store_says_which_stop_was_not_confirmed(
    two_hosts: tuple[Orch, list[Any]],
) -> None:
    """gpu-b's sshd is stopped (SIGSTOP: connections hang before the banner), so its remote stop cannot answer;
    the third Ctrl-C ends orch at once, the run is stored cancelled, gpu-b's host run names the stop that was not
    confirmed and the command that sends it; that command then stops gpu-b's agent."""
    orch, hosts = two_hosts
    store = Store.from_url(orch.db_url)
    proc, run_id = _start(orch, store)
    listener = hosts[1].proc
    short = run_id[-8:]
    try:
        os.kill(listener.pid, signal.SIGSTOP)
        _interrupt(proc, 2, 0.5)
        wait_for(lambda: not [p for p in _agent_procs(run_id) if "gpu-a" in p], timeout_s=60,
                 what="gpu-a's agent to stop")  # fmt: skip
        assert [p for p in _agent_procs(run_id) if "gpu-b" in p], "gpu-b's agent stopped without its sshd"
        assert proc.poll() is None, "orch ended before gpu-b's stop could answer"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=scaled(60))
    finally:
        os.kill(listener.pid, signal.SIGCONT)
        _stop(proc)
    try:
        assert proc.returncode == 130, err[-3000:]
        assert "Traceback" not in err and "Task was destroyed" not in err, err
        said = " ".join(err.split())
        assert "no longer waiting for the remote stops of run " + short in said, err
        assert (f"interrupted: run {short} stored cancelled; the remote stop was not confirmed on gpu-b: "
                f"run orch cancel {short}.") in said, err  # fmt: skip
        detail = store.get_run(run_id)
        assert detail.status == "cancelled"
        assert [(h.host, h.status, h.error) for h in detail.host_runs] == [
            ("gpu-a", "cancelled", "cancelled by the user"),
            ("gpu-b", "cancelled", "cancelled by the user; the remote stop was not confirmed (Ctrl-C was pressed "
             f"again before it answered): run orch cancel {short}"),
        ]
        assert detail.results >= 1 and detail.results == store.results(run_id, limit=1).total
        assert [p for p in _agent_procs(run_id) if "gpu-b" in p]  # still running there: orch said so

        res = orch("cancel", short, "--json", timeout=scaled(240))  # what the message said to run
        assert res.returncode == 0, res.stdout + res.stderr[-3000:]
        wait_for(lambda: not _agent_procs(run_id), timeout_s=60, what="gpu-b's agent to stop")
    finally:
        _kill_agents(run_id)
    detail = store.get_run(run_id)
    assert detail.status == "cancelled"
    assert [(h.host, h.status) for h in detail.host_runs] == [("gpu-a", "cancelled"), ("gpu-b", "cancelled")]
    store.close()


def _spool_results(orch: Orch, hosts: list[Any], run_id: str) -> dict[str, int]:
    """Per host, the result lines its agent wrote (the spool ends with the agent's done line once stopped)."""
    out = {}
    for h in hosts:
        lines = (h.home / ".orch" / "runs" / run_id / h.name / "events.jsonl").read_text().splitlines()
        assert '"type": "done"' in lines[-1] or '"type":"done"' in lines[-1], lines[-1]
        out[h.name] = sum(1 for line in lines if '"type": "result"' in line or '"type":"result"' in line)
    return out


def test_resume_of_an_interrupted_run_collects_what_the_stopped_agents_wrote(
    two_hosts: tuple[Orch, list[Any]],
) -> None:
    """Lines the agents wrote after orch stopped reading (up to their cancelled done line) were left on the hosts
    and --resume refused a cancelled run; now it collects them, starts nothing, and the run stays cancelled."""
    orch, hosts = two_hosts
    store = Store.from_url(orch.db_url)
    proc, run_id = _start(orch, store)
    try:
        _interrupt(proc, 1, 0)
        _, err = proc.communicate(timeout=scaled(180))
        assert proc.returncode == 130, err[-3000:]
        wait_for(lambda: not _agent_procs(run_id), timeout_s=60, what="the remote agents to stop")
    finally:
        _stop(proc)
        _kill_agents(run_id)
    written = _spool_results(orch, hosts, run_id)
    res = orch("run", "--resume", run_id[-8:], "--json", timeout=scaled(240))
    assert res.returncode == 1, res.stdout + res.stderr[-3000:]  # a cancelled run is not a success
    doc = json.loads(res.stdout)
    assert (doc["run_id"], doc["status"]) == (run_id, "cancelled"), doc
    assert [(h["host"], h["status"], h["results"]) for h in doc["hosts"]] == [
        (name, "cancelled", written[name]) for name in ("gpu-a", "gpu-b")]
    assert not _agent_procs(run_id)  # nothing was started again
    detail = store.get_run(run_id)
    assert detail.status == "cancelled"
    assert [(h.host, h.status, h.results) for h in detail.host_runs] == [
        (name, "cancelled", written[name]) for name in ("gpu-a", "gpu-b")]
    again = orch("run", "--resume", run_id)
    assert again.returncode == 2, again.stdout + again.stderr
    assert "already finished (cancelled): it was cancelled; there is nothing to resume" in again.stderr
    store.close()


PARSED_SUITE = """\
name: parsed-ticks
description: many short cases whose output is parsed in orch's parse worker (a user regex)
command: ["sh", "-c", "sleep 0.2; echo 'tput: {n}'"]
params:
  n: {type: list, default: [1], help: "cases"}
parser: {name: regex, pattern: 'tput: (?P<tput>\\d+)'}
metrics:
  tput: {path: tput, unit: tok/s}
warmup: 0
repeat: 1
timeout_s: 600
"""


def test_two_ctrl_c_with_the_parse_worker_running_print_no_traceback(
    two_hosts: tuple[Orch, list[Any]], tmp_path: Any
) -> None:
    """The SIGINTs reach orch's parse worker too (same process group): nothing of it may reach the terminal."""
    orch, _ = two_hosts
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "parsed.yaml").write_text(PARSED_SUITE)
    store = Store.from_url(orch.db_url)
    cases = "n=" + ",".join(str(i) for i in range(1, 2001))
    argv = orch.argv("run", "parsed-ticks", "--hosts", "ct200,b300", "--suite-dir", str(suites), "--set", cases,
                     "--timeout", str(scaled(30)))  # fmt: skip
    proc = subprocess.Popen(argv, cwd=orch.cwd, env=orch.env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    run_id = ""
    try:
        run_id = wait_for(lambda: _first_result(store) or proc.poll() is not None, timeout_s=180,
                          what="a first stored result")  # fmt: skip
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        wait_for(lambda: len(_agent_procs(run_id)) >= 2, timeout_s=60, what="an agent worker on each host")
        _interrupt(proc, 2, 0.5)
        _, err = proc.communicate(timeout=scaled(180))
    finally:
        _stop(proc)
        if run_id:
            _kill_agents(run_id)
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "Task was destroyed" not in err, err
    detail = store.get_run(run_id)
    assert detail.status == "cancelled" and [h.status for h in detail.host_runs] == ["cancelled", "cancelled"]
    store.close()
