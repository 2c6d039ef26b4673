"""An SSH session dropped while ``agent.pyz start`` runs (over real sshd): its sshd process is SIGKILLed while the
host's python holds the start (a wrapper named as the inventory's ``python:`` waits there until the test lets it
go, with the spec already read). Before, the host failed with "`…/agent.pyz start` exited with status None: exit
status None", no reconnect and no --resume hint, while the worker ran to completion on the host. Now orch
reconnects and sends the same start again (idempotent per run id and spec on the host) and follows the worker;
when the host cannot be reached again, the host's error says the connection dropped, that whether the run started
is not known, and the exact ``orch run --resume SHORT_ID``, which then collects the run."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.compute import short_run_id
from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.plugins.sshd import kill_processes_under
from tests.plugins.timing import scaled, wait_for

pytestmark = [pytest.mark.sshd]

WRAPPER = """\
#!{real}
# The host's python, holding `agent.pyz start` until {go} exists (its stdin, the spec, read first).
import os, sys, time
args = sys.argv[1:]
if "start" in args[1:2] and not os.path.exists({go!r}):
    spec = sys.stdin.buffer.read()
    with open({mark!r}, "w") as f:
        f.write(str(os.getpid()))
    while not os.path.exists({go!r}):
        time.sleep(0.05)
    r, w = os.pipe()
    os.write(w, spec)
    os.close(w)
    os.dup2(r, 0)
os.execv({real!r}, [{real!r}, *args])
"""

DEPLOY_WRAPPER = """\
#!{real}
# The host's python, holding the deploy check (`python -c <the deploy helper> ensure ...`) until {go} exists.
import os, sys, time
args = sys.argv[1:]
if args[:1] == ["-c"] and "ensure" in args and not os.path.exists({go!r}):
    with open({mark!r}, "w") as f:
        f.write(str(os.getpid()))
    while not os.path.exists({go!r}):
        time.sleep(0.05)
os.execv({real!r}, [{real!r}, *args])
"""

DROPPING_WRAPPER = """\
#!{real}
# The host's python, ending its own SSH session at every deploy check (`python -c <the deploy helper> ensure ...`):
# the first sshd among its ancestors (the session's process) is SIGKILLed; counted in {mark}.
import os, signal, sys
args = sys.argv[1:]
if args[:1] == ["-c"] and "ensure" in args:
    with open({mark!r}, "a") as f:
        f.write("dropped\\n")
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{{pid}}/stat") as f:
            stat = f.read()
        comm, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        if comm == "sshd":
            os.kill(pid, signal.SIGKILL)
            break
        pid = int(rest[1])
os.execv({real!r}, [{real!r}, *args])
"""

CASES = ("--set", "M=1,2,4", "--repeat", "3")


def _held(orch: Orch, tmp_path: Path, template: str = WRAPPER) -> tuple[Path, Path]:
    """Point the inventory's python at the wrapper; returns (marker, go) files."""
    mark, go = tmp_path / "start-held", tmp_path / "start-go"
    wrapper = tmp_path / "held-python"
    wrapper.write_text(template.format(real=sys.executable, go=str(go), mark=str(mark)))
    wrapper.chmod(0o755)
    inv = orch.inventory.read_text()
    assert f"python: {sys.executable}" in inv, inv
    orch.inventory.write_text(inv.replace(f"python: {sys.executable}", f"python: {wrapper}"))
    return mark, go


def _run(orch: Orch) -> subprocess.Popen[str]:
    return orch.popen("run", "moe-sweep", "--hosts", "gpu-a", "--preset", "tiny", *CASES, "--json",
                      "--timeout", str(scaled(30)))  # fmt: skip


def test_session_dropped_during_start_reconnects_and_completes(
    two_hosts: tuple[Orch, list[Any]], tmp_path: Path
) -> None:
    orch, hosts = two_hosts
    mark, go = _held(orch, tmp_path)
    proc = _run(orch)
    try:
        wait_for(lambda: mark.exists() or proc.poll() is not None, timeout_s=180, what="the start to be held")
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        hosts[0].kill_sessions()  # sshd's process of the session running `agent.pyz start` dies: the session drops
        go.touch()
        out, err = proc.communicate(timeout=scaled(300))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    assert "exit status None" not in err and "status None" not in out
    doc = json.loads(out)
    assert doc["status"] == "completed", doc
    store = Store.from_url(orch.db_url)
    try:
        hr = store.get_run(doc["run_id"]).host_run("gpu-a")
        assert hr is not None and hr.info["reconnects"] >= 1 and hr.status == "completed"
        # the drop a reconnect overcame is history (info.first_drop), never the completed host's error
        assert hr.error is None and isinstance(hr.info["first_drop"], str) and hr.info["first_drop"], hr
        assert sorted(r.case["M"] for r in store.results(doc["run_id"], limit=100).items) == [1, 2, 4]  # once each
        shown = orch("runs", "show", doc["run_id"], columns=400)
        assert f"gpu-a: reconnected {hr.info['reconnects']} time(s): " in shown.stdout, shown.stdout[-3000:]
    finally:
        store.close()


def test_session_dropped_during_start_with_the_host_gone_names_the_resume(
    two_hosts: tuple[Orch, list[Any]], tmp_path: Path
) -> None:
    orch, hosts = two_hosts
    mark, go = _held(orch, tmp_path)
    proc = _run(orch)
    try:
        wait_for(lambda: mark.exists() or proc.poll() is not None, timeout_s=180, what="the start to be held")
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        listener = hosts[0].proc
        assert listener is not None
        sessions = subprocess.run(["pgrep", "-P", str(listener.pid)], capture_output=True, text=True).stdout.split()
        assert sessions, "no sshd session process under the listener"
        hosts[0].stop()  # no sshd to come back to (its sessions outlive it) ...
        for pid in sessions:  # ... then the session running the start dies
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        go.touch()  # the held start goes on: the worker runs to completion on the host, unseen
        out, err = proc.communicate(timeout=scaled(300))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1, err[-3000:]
    doc = json.loads(out)
    (host,) = doc["hosts"]
    short = short_run_id(doc["run_id"])
    assert host["status"] == "failed", host
    assert host["error"].startswith("lost the connection and could not reattach: "), host
    assert host["error"].endswith("; whether its run started there is not known"), host
    assert "status None" not in host["error"]
    assert host["hint"] == f"collect it later with: orch run --resume {short}", host

    hosts[0].start()
    try:
        again = orch.json("run", "--resume", short, timeout=scaled(300))
    finally:
        kill_processes_under(tmp_path)
    assert again["status"] == "completed", again
    assert again["hosts"][0]["results"] == 3


def test_session_dropped_during_the_deploy_check_reconnects_and_completes(
    two_hosts: tuple[Orch, list[Any]], tmp_path: Path
) -> None:
    """A tester dropped the session while the deploy check ran: the host failed, its error holding the deploy
    helper's whole source (11 KB). Now the check is asked again on a new connection, the run completes, and the
    drop is history named in one short line."""
    orch, hosts = two_hosts
    mark, go = _held(orch, tmp_path, DEPLOY_WRAPPER)
    proc = _run(orch)
    try:
        wait_for(lambda: mark.exists() or proc.poll() is not None, timeout_s=180, what="the deploy check held")
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        hosts[0].kill_sessions()  # the session running the deploy check dies
        go.touch()
        out, err = proc.communicate(timeout=scaled(300))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    doc = json.loads(out)
    assert doc["status"] == "completed", doc
    store = Store.from_url(orch.db_url)
    try:
        hr = store.get_run(doc["run_id"]).host_run("gpu-a")
        assert hr is not None and hr.status == "completed" and hr.error is None, hr
        assert hr.info["reconnects"] >= 1, hr.info
        drop = hr.info["first_drop"]
        assert "the SSH session dropped while `" in drop and " -c " in drop and " ensure ..." in drop, drop
        assert "chars]" in drop and len(drop) < 400, drop  # the helper's source is not in it
        assert sorted(r.case["M"] for r in store.results(doc["run_id"], limit=100).items) == [1, 2, 4]
    finally:
        store.close()


def test_a_deploy_check_dropped_at_every_attempt_fails_the_host_saying_so_with_a_hint(
    two_hosts: tuple[Orch, list[Any]], tmp_path: Path
) -> None:
    """A tester dropped the session at each of the four deploy checks: the host's error was the last drop alone,
    with no word of the three retries and no hint. Now it says how many attempts dropped, and where to look."""
    orch, _ = two_hosts
    mark, _ = _held(orch, tmp_path, DROPPING_WRAPPER)
    proc = _run(orch)
    out, err = proc.communicate(timeout=scaled(300))
    assert proc.returncode == 1, err[-3000:]
    assert mark.read_text().count("dropped") == 4  # the first check and its 3 retries
    (host,) = json.loads(out)["hosts"]
    assert host["status"] == "failed", host
    assert host["error"].startswith("the SSH session dropped while `"), host
    assert host["error"].endswith(" — the session dropped on each of 4 attempts, each on a new connection"), host
    assert " ensure ..." in host["error"] and len(host["error"]) < 400, host  # the helper's source is not in it
    assert "sshd log" in host["hint"], host
