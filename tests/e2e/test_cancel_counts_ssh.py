"""``orch cancel RUN --json`` counts what the store holds for each host (a tester saw ``"results": 0`` for a host
whose store held 1 result): with the orch that started the run killed, and from a second shell while it runs.

The suite's first case ends at once with one result; its second sleeps until cancelled."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
from pathlib import Path

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.plugins.sshd import SshdBed
from tests.plugins.timing import scaled, wait_for

pytestmark = [pytest.mark.sshd]

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


def _results(store: Store) -> tuple[str, int] | None:
    """(the run's id, the results its host runs hold) once they hold one."""
    try:
        page = store.list_runs(limit=1)
    except Exception:  # noqa: BLE001 - the run has not created the schema yet
        return None
    if not page.total:
        return None
    run = store.get_run(page.items[0].id)
    held = sum(h.results for h in run.host_runs)
    return (run.id, held) if held >= 1 else None


@pytest.mark.parametrize("first_orch", ["running", "killed"])
def test_cancel_json_counts_come_from_the_store(sshd_bed: SshdBed, tmp_path: Path, first_orch: str) -> None:
    host = sshd_bed.add("gpu-a")
    inv = tmp_path / "inventory.yaml"
    inv.write_text(sshd_bed.inventory_yaml({"ct200": [host]}))
    orch = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    suites = tmp_path / "suites"
    suites.mkdir()
    secs = str(random.randint(10**6, 2 * 10**6))  # never ends by itself during the test; no other sleep uses it
    (suites / "counts.yaml").write_text(SUITE.replace("SECS", secs))
    store = Store.from_url(orch.db_url)
    proc = orch.popen("run", "cancel-counts", "--hosts", "ct200", "--suite-dir", str(suites),
                      "--timeout", str(scaled(30)), "--json")  # fmt: skip
    try:
        found = wait_for(lambda: _results(store) or (proc.poll() is not None and ("", 0)), timeout_s=180,
                         what="the first case's result stored")  # fmt: skip
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        run_id = found[0]
        if first_orch == "killed":
            proc.kill()
            proc.communicate()
        res = orch("cancel", run_id, "--json", timeout=scaled(240))
        assert res.returncode == 0, res.stderr[-3000:]
        doc = json.loads(res.stdout)
        shown = store.get_run(run_id)
        assert [(h.host, h.results, h.errors) for h in shown.host_runs] == [("gpu-a", 1, 0)]
        assert [(h["host"], h["status"], h["results"], h["errors"]) for h in doc["hosts"]] == [
            ("gpu-a", "cancelled", 1, 0)
        ], doc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        store.close()
        _kill_sleeps(secs)


def _kill_sleeps(secs: str) -> None:
    """Kill, by pid, what a failed test left: the ``sleep SECS`` of the second case."""
    out = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        pid, _, args = line.strip().partition(" ")
        if args.strip() == f"sleep {secs}":
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid), signal.SIGKILL)
