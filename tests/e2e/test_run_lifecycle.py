"""A run's life over real sshd with command suites whose output is known in advance: what the runner derives and
stores (the plateau of a batch sweep, next to the spec, preset and GPU spec recorded at start), and a run whose
orch died, collected by ``orch run --resume`` — on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.e2e.killed_run import killed_after_first_result
from tests.plugins.timing import scaled

pytestmark = [pytest.mark.sshd]

# time_ms = min(M, 8): slower with M up to 8, flat from there — the plateau starts at M=8 (10% band).
STEP_SUITE = """\
name: step-sweep
description: a batch sweep whose time per call stops growing at M=8
command: ["/bin/sh", "-c", "m=$1; if [ $m -gt 8 ]; then m=8; fi; echo \\"time: $m\\"", "sh", "{M}"]
params:
  M: {type: list, default: [1, 2, 4, 8, 16, 32, 64], help: "batch size"}
parser: {name: regex, pattern: 'time: (?P<time_ms>[0-9.]+)'}
metrics:
  time_ms: {path: time_ms, unit: ms}
"""


def test_the_stored_plateau_is_where_the_measured_times_flatten(
    two_hosts: tuple[Orch, list[Any]], tmp_path: Path
) -> None:
    """Issue 19: the plateau the runner stores was never read by a test (a tiny CPU moe-sweep's times are too
    noisy to pin it)."""
    orch, _ = two_hosts
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "step.yaml").write_text(STEP_SUITE)
    doc = orch.json("run", "step-sweep", "--hosts", "ct200", "--suite-dir", str(suites))
    assert doc["status"] == "completed", doc
    store = Store.from_url(orch.db_url)
    rows = store.results(doc["run_id"], limit=100).items
    assert sorted((r.case["M"], r.metrics["time_ms"]["value"]) for r in rows) == [
        (1, 1.0), (2, 2.0), (4, 4.0), (8, 8.0), (16, 8.0), (32, 8.0), (64, 8.0)
    ]  # fmt: skip
    hr = store.get_run(doc["run_id"]).host_run("gpu-a")
    assert hr is not None
    assert hr.info["plateau"] == {"plateau_from_m": 8, "compute_bound_from_m": None, "level_ms": 8.0,
                                  "metric": "time_ms", "tol": 0.10, "reason": None}  # fmt: skip
    assert (hr.info["reconnects"], hr.info["preset"], hr.info["gpu_spec"]) == (0, None, None)
    assert [c["M"] for c in hr.info["spec"]["cases"]] == [1, 2, 4, 8, 16, 32, 64]
    store.close()


# Each case takes 2 s (a sleeping command): a run of 6 cases is still going when its first result is stored.
SLOW_SUITE = """\
name: slow-steps
description: six cases of two seconds each
command: ["/bin/sh", "-c", "sleep 2; echo \\"step: $1\\"", "sh", "{step}"]
params:
  step: {type: list, default: [1, 2, 3, 4, 5, 6], help: "case number"}
parser: {name: regex, pattern: 'step: (?P<step>[0-9]+)'}
metrics:
  step: {path: step, unit: count}
"""


def test_resume_collects_an_unfinished_run_once(two_hosts_any_db: tuple[Orch, list[Any]], tmp_path: Path) -> None:
    """Issue 19: no test resumed an unfinished run. orch dies mid-run; the agent goes on on the host;
    ``orch run --resume`` follows the spool from the last stored line to the end: each case exactly once, the
    agent not started again."""
    orch, hosts = two_hosts_any_db
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "slow.yaml").write_text(SLOW_SUITE)
    store = Store.from_url(orch.db_url)
    run_id = killed_after_first_result(orch, store, "slow-steps", "--hosts", "gpu-a", "--suite-dir", str(suites),
                                       "--timeout", str(scaled(30)))  # fmt: skip
    before = store.get_run(run_id)
    assert before.status == "running" and 1 <= before.results < 6, before

    # without --suite-dir the user suite is unknown: exit 2 before any host is touched, naming the suite file
    res = orch("run", "--resume", run_id, "--timeout", str(scaled(30)), timeout=scaled(120))
    assert res.returncode == 2, res.stdout + res.stderr
    said = " ".join(res.stderr.split())  # free text wraps at words to the width (a path is never broken)
    assert f"error: run {run_id[-8:]} is of suite 'slow-steps', which is not known without its suite file" in said
    assert (
        f"hint: the run was started from {(suites / 'slow.yaml').resolve()}: pass --suite-dir {suites.resolve()} "
        "(or set ORCH_SUITE_DIR); suites known now: "
    ) in said, res.stderr
    after = store.get_run(run_id)
    assert (after.status, [(h.host, h.status) for h in after.host_runs]) == (
        "running", [(h.host, h.status) for h in before.host_runs]
    )

    doc = orch.json("run", "--resume", run_id, "--suite-dir", str(suites), "--timeout", str(scaled(30)),
                    timeout=scaled(240))  # fmt: skip
    assert doc["run_id"] == run_id and doc["status"] == "completed", doc
    assert [(h["host"], h["status"], h["results"]) for h in doc["hosts"]] == [("gpu-a", "completed", 6)]
    events = next((hosts[0].home / ".orch" / "runs" / run_id).rglob("events.jsonl"))
    lines = events.read_text().splitlines()
    assert sum('"type":"hello"' in x.replace(" ", "") for x in lines) == 1  # resumed, not started again
    detail = store.get_run(run_id)
    hr = detail.host_run("gpu-a")
    assert hr is not None and (hr.status, hr.results, hr.errors, hr.last_seq) == ("completed", 6, 0, len(lines) - 1)
    assert (detail.status, detail.results) == ("completed", 6)
    assert sorted(r.case["step"] for r in store.results(run_id, limit=100).items) == [1, 2, 3, 4, 5, 6]
    # importing the spool needs the suite too: exit 2 naming the spool and --suite-dir
    res = orch("runs", "import", str(events), "--host", "gpu-a", timeout=scaled(120))
    assert res.returncode == 2, res.stdout + res.stderr
    said = " ".join(res.stderr.split())
    assert f"error: {events}:1: the hello names suite 'slow-steps', unknown to orch here" in said
    assert "--suite-dir DIR (or ORCH_SUITE_DIR)" in said and "Traceback" not in res.stderr
    store.close()
