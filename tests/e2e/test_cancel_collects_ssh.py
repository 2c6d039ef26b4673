"""``orch cancel RUN`` of a run stuck at ``running`` whose agents already finished (issue 10/21 trial: 7 results in
each host's spool, 0 stored; cancel stored the run cancelled with 0 results and ``--resume`` then refused, so the
results on the hosts were thrown away). Cancel collects what the spools hold beyond the stored lines first: a host
whose agent wrote ``done`` ends with its own status and results. Real sshd, the CLI as a subprocess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.e2e.test_run_ssh import _agent_procs, _has_runs, _kill_agents
from tests.plugins.timing import scaled, wait_for

pytestmark = [pytest.mark.sshd, pytest.mark.torch]


def _done(spool: Path) -> dict[str, Any] | None:
    lines = spool.read_text().splitlines() if spool.is_file() else []
    last = json.loads(lines[-1]) if lines and lines[-1].endswith("}") else {}
    return last if last.get("type") == "done" else None


def test_cancel_of_a_run_whose_agents_finished_collects_their_results(two_hosts: tuple[Orch, list[Any]]) -> None:
    orch, hosts = two_hosts
    store = Store.from_url(orch.db_url)
    proc = orch.popen("run", "moe-sweep", "--hosts", "ct200,b300", "--preset", "tiny", "--repeat", "50",
                      "--timeout", str(scaled(30)))  # fmt: skip
    run_id = ""
    try:
        wait_for(lambda: _has_runs(store) or proc.poll() is not None, timeout_s=180, what="the stored run")
        run_id = store.list_runs(limit=1).items[0].id
        wait_for(lambda: len(_agent_procs(run_id)) >= 2 or proc.poll() is not None, timeout_s=120,
                 what="an agent worker on each host")  # fmt: skip
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        proc.kill()  # orch dies; the detached agents run on to their end
        proc.communicate()
        spools = [h.home / ".orch" / "runs" / run_id / h.name / "events.jsonl" for h in hosts]
        wait_for(lambda: all(_done(s) for s in spools), timeout_s=240, what="both agents to write done")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        if run_id:
            _kill_agents(run_id)
    assert [(d["status"], d["counts"]["results"]) for d in map(_done, spools)] == [("completed", 7)] * 2  # type: ignore[index]
    before = store.get_run(run_id)
    assert before.status == "running" and before.results < 14, (before.status, before.results)

    res = orch("cancel", run_id[-8:], "--json", timeout=scaled(240))
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert (doc["run_id"], doc["status"]) == (run_id, "completed"), doc
    assert [(h["host"], h["status"], h["results"], h["errors"], h["error"]) for h in doc["hosts"]] == [
        ("gpu-a", "completed", 7, 0, None), ("gpu-b", "completed", 7, 0, None)]
    detail = store.get_run(run_id)
    assert (detail.status, detail.results) == ("completed", 14)
    assert [(h.host, h.status, h.results) for h in detail.host_runs] == [("gpu-a", "completed", 7),
                                                                         ("gpu-b", "completed", 7)]
    page = store.results(run_id, limit=100)
    assert sorted((r.host, r.case["M"]) for r in page.items) == sorted(
        (h, m) for h in ("gpu-a", "gpu-b") for m in (1, 2, 4, 8, 16, 32, 64))  # each case once, enriched
    assert all("gbps" in r.metrics for r in page.items)
    again = orch("run", "--resume", run_id)
    assert again.returncode == 2, again.stdout + again.stderr
    assert "every host's done line is stored; there is nothing to resume" in " ".join(again.stderr.split())
    store.close()
