"""A SIGTERM sent to the agent worker from outside orch (an admin's ``kill``, a watchdog, systemd-oomd) over real
sshd, on SQLite and PostgreSQL (issue 10, follow-up). Before, the worker wrote ``done`` ``cancelled`` and orch
showed the host as cancelled, as if the user had run ``orch cancel``. Only ``agent cancel`` (``orch cancel``,
Ctrl-C) leaves the run's ``cancel`` marker before it signals; a SIGTERM without it makes the host ``failed``,
naming the SIGTERM and saying that ``--resume`` cannot continue the worker, with the lines it stored kept."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.e2e.test_worker_signals import CASES, _newest_run, _worker
from tests.plugins.timing import scaled, wait_for


@pytest.mark.sshd
def test_sigterm_from_outside_fails_the_host_and_keeps_its_lines(one_host_any_db: tuple[Orch, Any]) -> None:
    orch, _ = one_host_any_db
    proc = orch.popen("run", "moe-sweep", "--hosts", "gpu-a", "--preset", "tiny", *CASES, "--json",
                      "--timeout", str(scaled(30)))  # fmt: skip
    store = Store.from_url(orch.db_url)
    try:
        run_id = wait_for(lambda: _newest_run(store) or (proc.poll() is not None and "ended"), timeout_s=180,
                          what="a first stored result")  # fmt: skip
        assert proc.poll() is None, "the run ended before its worker could be signalled: " + proc.communicate()[1]
        worker = wait_for(lambda: _worker(run_id, "gpu-a"), timeout_s=60, what=f"run {run_id}'s worker")
        os.kill(worker, signal.SIGTERM)
        out, err = proc.communicate(timeout=scaled(300))
        assert proc.returncode == 1, out[-3000:] + err[-3000:]
        doc = json.loads(out)
        assert doc["status"] == "partial", doc  # its one host failed after storing results
        (host,) = doc["hosts"]
        assert host["status"] == "failed", host
        assert "terminated by SIGTERM from outside orch" in host["error"], host
        assert "--resume cannot continue a terminated worker: rerun" in host["hint"], host
        hr = store.get_run(run_id).host_run("gpu-a")
        assert hr is not None and hr.status == "failed" and "SIGTERM from outside orch" in (hr.error or "")
        assert hr.results >= 1 and hr.results == host["results"]  # what it wrote before is stored and kept
        assert store.get_run(run_id).status != "cancelled"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        store.close()
