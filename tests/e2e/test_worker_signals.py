"""Signals on the host mid-run (issue 10, "nothing lost"), over real sshd and on a ``connection: local`` host.

- The process that streams the spool to orch (``agent start --follow``, later ``agent follow``) SIGKILLed — an
  OOM kill, an admin's ``pkill python``, a watchdog. The worker is detached (its own session) and keeps writing
  its spool, so nothing is lost: orch follows it again from the last stored line, and the run ends
  ``completed`` with every case once. Before, the host failed ("... was killed by signal HUP": asyncssh's -1 for
  a signal, read as a status) and only ``--resume`` collected the rest.
- The host gone silent mid-run (power loss, a kernel panic, a partitioned network: no FIN, no RST) — here its
  sshd session processes SIGSTOPped, so nothing answers on the open connection. Without ssh_config's
  ServerAliveInterval (OpenSSH's default: off) orch waited on that connection without end; now it sends
  keepalives by default, drops the silent connection, reconnects and follows the spool from the last stored line.
- The worker SIGSTOPped (a debugger, a job-control stop, Slurm's ``scontrol suspend``): it writes nothing and
  keeps none of its deadlines, and orch waited on it without end. Now the host fails once the worker has been
  stopped for ``ORCH_WORKER_STOPPED_S``, saying so with its pid; after ``kill -CONT``, ``--resume`` collects
  the rest."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch, local_orch
from tests.plugins.timing import scaled, wait_for

CASES = ("--set", "M=" + ",".join(str(m) for m in range(1, 41)), "--repeat", "10")


def _parent(pid: int) -> bytes:
    """The command line of ``pid``'s parent (/proc/PID/stat after the command name: state ppid ...)."""
    ppid = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
    return Path(f"/proc/{ppid}/cmdline").read_bytes()


def _followers(run_id: str) -> list[int]:
    """Pids of the agent processes that stream run ``run_id``'s spool to orch (``start … --follow``, or ``follow
    RUN_ID`` after a reconnect): their parent is sshd's session process (or orch itself, on a local host). The
    worker, forked from start with start's command line, is start's child (init's once start is gone); what the
    worker forks is the worker's."""
    out = subprocess.run(["pgrep", "-af", run_id], capture_output=True, text=True).stdout
    pids = []
    for line in out.splitlines():
        pid, _, cmd = line.partition(" ")
        if "/.orch/agent/" not in cmd or not {"follow", "--follow"} & set(cmd.split()):
            continue
        try:
            parent = _parent(int(pid))
        except (OSError, IndexError):
            continue  # gone
        if parent.startswith(b"sshd") or b"orchestrator" in parent:
            pids.append(int(pid))
    return pids


def _worker(run_id: str, host: str) -> int | None:
    """The pid of run ``run_id``'s worker on ``host``: the agent process that leads its own session with the
    host's run directory (``<orch home>/runs/RUN_ID/HOST``) as its working directory."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            session = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[3])
        except (OSError, IndexError, ValueError):
            continue
        if cwd.endswith(f"/runs/{run_id}/{host}") and session == int(entry.name):
            return int(entry.name)
    return None


def _newest_run(store: Store) -> str | None:
    try:
        runs = store.list_runs(limit=1).items
    except Exception:  # noqa: BLE001 - the run has not created the schema yet
        return None
    return runs[0].id if runs and runs[0].results >= 1 else None


def _kill_follower_mid_run(orch: Orch, host: str, kills: int) -> tuple[dict[str, Any], Store]:
    proc = orch.popen("run", "moe-sweep", "--hosts", host, "--preset", "tiny", *CASES, "--json",
                      "--timeout", str(scaled(30)))  # fmt: skip
    store = Store.from_url(orch.db_url)
    worker = None
    try:
        run_id = wait_for(lambda: _newest_run(store) or (proc.poll() is not None and "ended"), timeout_s=180,
                          what="a first stored result")  # fmt: skip
        assert proc.poll() is None, "the run ended before its follower could be killed: " + proc.communicate()[1]
        # The worker held (SIGSTOP) while its followers are killed: on a loaded machine a reconnect can take longer
        # than the rest of the sweep, and the run would end before the next kill (CI saw that). The caller sets
        # ORCH_WORKER_STOPPED_S far above the test's length, so the hold is not taken for a stopped worker.
        worker = wait_for(lambda: _worker(run_id, host), timeout_s=60, what=f"run {run_id}'s worker")
        os.kill(worker, signal.SIGSTOP)
        for n in range(kills):
            pids = wait_for(lambda: _followers(run_id) or proc.poll() is not None, timeout_s=120,
                            what=f"a follower of run {run_id} (kill {n + 1})")  # fmt: skip
            assert proc.poll() is None, f"the run ended before kill {n + 1}: {proc.communicate()[1][-3000:]}"
            killed = set(pids)
            for pid in killed:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            wait_for(lambda k=killed: not k & set(_followers(run_id)), timeout_s=60, what="the follower to die")
        os.kill(worker, signal.SIGCONT)
        out, err = proc.communicate(timeout=scaled(300))
    finally:
        if worker is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(worker, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    doc = json.loads(out)
    assert doc["status"] == "completed", doc
    return doc, store


@pytest.mark.sshd
@pytest.mark.parametrize("kills", [1, 2])
def test_a_killed_follower_over_ssh_is_followed_again_and_the_run_completes(
    two_hosts: tuple[Orch, list[Any]], kills: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCH_WORKER_STOPPED_S", "3600")  # the test holds the worker (see _kill_follower_mid_run)
    orch, _ = two_hosts
    doc, store = _kill_follower_mid_run(orch, "gpu-a", kills)
    try:
        hr = store.get_run(doc["run_id"]).host_run("gpu-a")
        assert hr is not None and hr.status == "completed" and hr.info["reconnects"] >= kills
        assert sorted(r.case["M"] for r in store.results(doc["run_id"], limit=100).items) == list(range(1, 41))
    finally:
        store.close()


def test_a_killed_follower_on_a_local_host_is_followed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCH_WORKER_STOPPED_S", "3600")
    orch = local_orch(tmp_path)
    doc, store = _kill_follower_mid_run(orch, "localhost", 1)
    try:
        hr = store.get_run(doc["run_id"]).host_run("localhost")
        assert hr is not None and hr.status == "completed" and hr.info["reconnects"] >= 1
        assert sorted(r.case["M"] for r in store.results(doc["run_id"], limit=100).items) == list(range(1, 41))
    finally:
        store.close()


def _stop_worker_mid_run(orch: Orch, host: str) -> None:
    """A run whose worker is SIGSTOPped after its first result fails that host, naming the stop and the pid; after
    SIGCONT, ``--resume`` collects every case once."""
    proc = orch.popen("run", "moe-sweep", "--hosts", host, "--preset", "tiny", *CASES, "--json",
                      "--timeout", str(scaled(30)))  # fmt: skip
    store = Store.from_url(orch.db_url)
    pid = None
    try:
        run_id = wait_for(lambda: _newest_run(store) or (proc.poll() is not None and "ended"), timeout_s=180,
                          what="a first stored result")  # fmt: skip
        assert proc.poll() is None, "the run ended before its worker could be stopped: " + proc.communicate()[1]
        pid = wait_for(lambda: _worker(run_id, host), timeout_s=60, what=f"run {run_id}'s worker")
        os.kill(pid, signal.SIGSTOP)
        out, err = proc.communicate(timeout=scaled(300))  # it waited without end before
        assert proc.returncode == 1, out[-3000:] + err[-3000:]
        doc = json.loads(out)
        (h,) = doc["hosts"]
        assert h["status"] == "failed" and doc["status"] in ("partial", "failed"), doc
        assert f"agent worker (pid {pid}) has been stopped for " in h["error"], h
        assert h["error"].endswith("; the lines already stored are kept"), h
        assert h["hint"].startswith(f"`kill -CONT {pid}` on the host lets it go on, then `orch run --resume "), h
        still = orch.json("run", "--resume", run_id, expect_rc=1, timeout=scaled(300))  # not continued yet
        assert f"agent worker (pid {pid}) has been stopped for " in still["hosts"][0]["error"], still
        os.kill(pid, signal.SIGCONT)
        again = orch.json("run", "--resume", run_id, timeout=scaled(300))
    finally:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    try:
        assert again["status"] == "completed", again
        assert sorted(r.case["M"] for r in store.results(run_id, limit=100).items) == list(range(1, 41))
    finally:
        store.close()


@pytest.mark.sshd
def test_a_stopped_worker_over_ssh_fails_its_host_saying_so_and_resume_collects_the_rest(
    two_hosts: tuple[Orch, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCH_WORKER_STOPPED_S", "3")  # a worker is stopped only when stopped: no load makes it so
    _stop_worker_mid_run(two_hosts[0], "gpu-a")


def test_a_stopped_worker_on_a_local_host_fails_it_saying_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCH_WORKER_STOPPED_S", "3")
    _stop_worker_mid_run(local_orch(tmp_path), "localhost")


def _sshd_sessions(listener: int) -> list[int]:
    """The sshd processes under sshd ``listener`` (each connection's monitor and its network child), not the
    commands they run (the agent's follower and the worker it forked stay running)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], list(children.get(listener, []))
    while todo:
        pid = todo.pop()
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sshd"):
                out.append(pid)
                todo.extend(children.get(pid, []))
        except OSError:
            continue
    return out


@pytest.mark.sshd
def test_a_host_gone_silent_mid_run_is_dropped_by_keepalive_and_followed_again(
    two_hosts: tuple[Orch, list[Any]],
) -> None:
    orch, hosts = two_hosts
    proc = orch.popen("run", "moe-sweep", "--hosts", "gpu-a", "--preset", "tiny", *CASES, "--json",
                      "--timeout", str(scaled(30)))  # fmt: skip
    store = Store.from_url(orch.db_url)
    silent: list[int] = []
    try:
        wait_for(lambda: _newest_run(store) or proc.poll() is not None, timeout_s=180, what="a first stored result")
        assert proc.poll() is None, "the run ended before the host could go silent: " + proc.communicate()[1]
        assert hosts[0].proc is not None
        silent = _sshd_sessions(hosts[0].proc.pid)
        assert silent, "no sshd session process under gpu-a's listener"
        for pid in silent:
            os.kill(pid, signal.SIGSTOP)
        out, err = proc.communicate(timeout=scaled(400))  # without keepalives: no end
    finally:
        for pid in silent:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    try:
        assert proc.returncode == 0, out[-3000:] + err[-3000:]
        doc = json.loads(out)
        assert doc["status"] == "completed", doc
        hr = store.get_run(doc["run_id"]).host_run("gpu-a")
        assert hr is not None and hr.status == "completed" and hr.info["reconnects"] >= 1
        assert sorted(r.case["M"] for r in store.results(doc["run_id"], limit=100).items) == list(range(1, 41))
    finally:
        store.close()


def _alive(pid: int) -> bool:
    """``pid`` is a process that has not exited (a zombie has: only its parent's reaping is left)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _stop_follower_mid_run(orch: Orch, host: str) -> tuple[dict[str, Any], Store]:
    """SIGSTOP the process that streams the spool to orch after the first stored result (the worker runs on). It
    writes nothing, not even its heartbeat: orch kills it once ORCH_FOLLOWER_SILENT_S has passed and follows the
    spool again from the last stored line. Before, the run waited without end. The stopped followers must be gone
    when the run ends: orch killed them (the test's own SIGCONT and SIGKILL in ``finally`` only clean up a
    failure)."""
    proc = orch.popen("run", "moe-sweep", "--hosts", host, "--preset", "tiny", *CASES, "--json",
                      "--timeout", str(scaled(30)))  # fmt: skip
    store = Store.from_url(orch.db_url)
    stopped: set[int] = set()
    try:
        run_id = wait_for(lambda: _newest_run(store) or (proc.poll() is not None and "ended"), timeout_s=180,
                          what="a first stored result")  # fmt: skip
        assert proc.poll() is None, "the run ended before its follower could be stopped: " + proc.communicate()[1]
        pids = wait_for(lambda: _followers(run_id) or proc.poll() is not None, timeout_s=120,
                        what=f"a follower of run {run_id}")  # fmt: skip
        assert proc.poll() is None, f"the run ended before its follower was found: {proc.communicate()[1][-3000:]}"
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
                stopped.add(pid)
        assert stopped, "every follower was gone before it could be stopped"
        out, err = proc.communicate(timeout=scaled(300))  # it waited without end before
        with contextlib.suppress(AssertionError):  # judged below, after the cleanup
            wait_for(lambda: not [p for p in stopped if _alive(p)], timeout_s=30, what="the followers to be gone")
        left = [p for p in stopped if _alive(p)]
    finally:
        for pid in stopped:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    assert not left, f"stopped followers {left} were left behind"
    doc = json.loads(out)
    assert doc["status"] == "completed", doc
    hr = store.get_run(doc["run_id"]).host_run(host)
    assert hr is not None and hr.status == "completed" and hr.info["reconnects"] >= 1, hr
    assert sorted(r.case["M"] for r in store.results(doc["run_id"], limit=100).items) == list(range(1, 41))
    return doc, store


# 10 s of silence: the follower beats every 1 s (a tenth), so a live one would have to miss ten beats in a row —
# a loaded 2-core machine delays a runnable process by a fraction of a second, not that; a stopped one misses all.
FOLLOWER_SILENT_S = "10"


@pytest.mark.sshd
def test_a_stopped_follower_over_ssh_is_killed_and_followed_again(
    two_hosts: tuple[Orch, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCH_FOLLOWER_SILENT_S", FOLLOWER_SILENT_S)
    _doc, store = _stop_follower_mid_run(two_hosts[0], "gpu-a")
    store.close()


def test_a_stopped_follower_on_a_local_host_is_killed_and_followed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCH_FOLLOWER_SILENT_S", FOLLOWER_SILENT_S)
    _doc, store = _stop_follower_mid_run(local_orch(tmp_path), "localhost")
    store.close()
