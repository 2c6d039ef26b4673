"""The cancel-counts bed shared by the cancel e2e tests (test_cancel_counts_ssh.py, test_cancel_cut_spool_ssh.py):
one sshd host ``gpu-a`` (group ct200), orch on an SQLite store, and ``orch run cancel-counts`` started as a
subprocess. The suite's first case prints one result at once; its second sleeps ``secs`` seconds, a random figure
no other sleep on the machine uses, so that it never ends by itself during a test and :func:`kill_sleeps` finds
exactly what a failed test left behind.

No step depends on timing: each wait is :func:`tests.plugins.timing.wait_for` on a state read from the store,
with a generous scaled deadline."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.plugins.sshd import SshdBed, SshdHost
from tests.plugins.timing import scaled, wait_for

T = TypeVar("T")

SUITE = """\
name: cancel-counts
description: the first case prints one result at once, the second sleeps until cancelled
command: ["sh", "-c", "sleep {secs}; echo 'tput: 1'"]
params:
  secs: {type: list, default: [0, SECS], help: "seconds each case sleeps"}
parser: {name: regex, pattern: 'tput: (?P<tput>\\d+)'}
metrics:
  tput: {path: tput, unit: tok/s}
warmup: 0
repeat: 1
timeout_s: 1800
"""


@dataclass
class CountsRun:
    """A running ``orch run cancel-counts`` on ``host`` (``proc``, its own process group when ``new_session``),
    the store it writes (``store``) and the second case's ``sleep`` argument (``secs``)."""

    orch: Orch
    host: SshdHost
    store: Store
    proc: subprocess.Popen[str]
    secs: str

    def wait(self, found: Callable[[Store], T | None], what: str) -> T:
        """``found(store)`` once it is not None (deadline 180 s scaled); fails at once, with orch's stderr, if
        ``orch run`` exits first."""
        got = wait_for(lambda: found(self.store) or (self.proc.poll() is not None and "exited"), timeout_s=180,
                       what=what)  # fmt: skip
        assert self.proc.poll() is None, self.proc.communicate()[1][-3000:]
        return got  # type: ignore[return-value]


@contextlib.contextmanager
def counts_run(
    sshd_bed: SshdBed, tmp_path: Path, *, new_session: bool = False, env: dict[str, str] | None = None
) -> Iterator[CountsRun]:
    """Start the bed and ``orch run cancel-counts --json`` (``env``: added to orch's environment); on exit kill
    what is left (orch by pid, or its process group when ``new_session``; the sleeping case's ``sleep`` by pid)
    and close the store."""
    host = sshd_bed.add("gpu-a")
    inv = tmp_path / "inventory.yaml"
    inv.write_text(sshd_bed.inventory_yaml({"ct200": [host]}))
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    suites = tmp_path / "suites"
    suites.mkdir()
    secs = str(random.randint(10**6, 2 * 10**6))  # never ends by itself during the test; no other sleep uses it
    (suites / "counts.yaml").write_text(SUITE.replace("SECS", secs))
    store = Store.from_url(orch.db_url)
    argv = orch.argv("run", "cancel-counts", "--hosts", "ct200", "--suite-dir", str(suites),
                     "--timeout", str(scaled(30)), "--json")  # fmt: skip
    proc = subprocess.Popen(argv, cwd=orch.cwd, env={**orch.env(), **(env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=new_session)  # fmt: skip
    try:
        yield CountsRun(orch, host, store, proc, secs)
    finally:
        if proc.poll() is None:
            if new_session:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            else:
                proc.kill()
        # also when it ended by itself (the test's cancel stopped it): its pipes left open were a ResourceWarning
        # whenever the garbage collector happened to close them inside a later test's call (seen once under load)
        proc.communicate(timeout=scaled(120))
        store.close()
        kill_sleeps(secs)


def latest_run(store: Store) -> str | None:
    """The id of the newest run in ``store``, None before ``orch run`` created its schema and run."""
    try:
        page = store.list_runs(limit=1)
    except Exception:  # noqa: BLE001 - the run has not created the schema yet
        return None
    return page.items[0].id if page.total else None


def stored_four(store: Store) -> str | None:
    """The run's id once it stored hello, case_start, result and the sleeping case's case_start (seq 3)."""
    rid = latest_run(store)
    return rid if rid is not None and store.last_seq(rid, "gpu-a") >= 3 else None


def cut_spool(host: SshdHost, run_id: str, keep: int) -> tuple[Path, list[bytes]]:
    """``head -n KEEP events.jsonl > t; cat t > events.jsonl`` on the host (the file keeps its inode). Returns the
    spool's path and its lines as they were before the cut."""
    [spool] = (host.home / ".orch" / "runs").glob(f"{run_id}/gpu-a/events.jsonl")
    lines = spool.read_bytes().splitlines(keepends=True)
    with open(spool, "r+b") as f:
        f.truncate(0)
        f.write(b"".join(lines[:keep]))
    return spool, lines


def spool_cut_text(spool: Path, have: int, stored: int) -> str:
    """The agent's exit-6 text for ``agent cancel --stored STORED`` on a spool of ``have`` lines."""
    return (f"exited with status 6: the spool {spool} has {have} lines, orch had stored {stored}: it was cut or "
            "rewritten on the host after orch read it; no done line written")  # fmt: skip


def kill_sleeps(secs: str) -> None:
    """Kill, by pid, what a failed test left: the ``sleep SECS`` of the second case."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        if args.strip() == f"sleep {secs}":
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid), signal.SIGKILL)
