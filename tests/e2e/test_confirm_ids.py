"""Ids the user sees are the run's short id (issue 21): ``orch runs check latest --base latest~1 --confirm`` whose
confirming rerun fails said ``the confirming rerun <36-character id> of run <36-character id>``: the messages
name both runs by the short id that ``orch runs show`` takes and that still names the same run later."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from orchestrator.protocol import Event
from orchestrator.store.compute import short_run_id
from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch, store_of

store = pytest.fixture(store_of, name="store")

SUITE = f"""\
name: fails-on-rerun
description: a tool that exits 3 (the stored runs below were measured before it broke)
command: ["{sys.executable}", "-c", "import sys; sys.exit(3)", "{{ms}}"]
params:
  ms: {{type: list, default: [100], help: "sleep, ms"}}
repeat: 8
timeout_s: 60
parser: json
metrics:
  time_ms: {{path: time_ms, unit: ms}}
"""


@pytest.fixture
def orch(tmp_path: Path) -> Orch:
    inv = tmp_path / "inventory.yaml"
    home = tmp_path / "home"
    inv.write_text(f"groups:\n  local:\n    hosts:\n      localhost: {{connection: local, orch_home: {home}}}\n")
    o = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    res = o("db", "upgrade")
    assert res.returncode == 0, res.stderr
    return o


def _run(store: Store, center: float, seed: int) -> str:
    xs = [float(x) for x in np.random.default_rng(seed).normal(center, center * 0.01, 8)]
    p10, med, p90 = (float(q) for q in np.quantile(xs, [0.1, 0.5, 0.9]))
    store.upsert_host("localhost", address=None, group="local", labels={})
    rid = store.create_run(suite="fails-on-rerun", params={}, preset=None, label=None, hosts=["localhost"],
                           started_by="t@box", started_on="box")  # fmt: skip
    store.start_host_run(rid, "localhost", facts={"gpus": []}, agent_version="v", build_sha=None)
    metric = {"value": med, "unit": "ms", "median": med, "p10": p10, "p90": p90, "n": 8, "samples": xs}
    store.ingest(rid, "localhost", [Event(seq=0, type="result", data={"case": {"ms": 100},
                                                                       "metrics": {"time_ms": metric}})])
    store.finish_host_run(rid, "localhost", "completed")
    store.finish_run(rid, "completed")
    return rid


def test_a_failed_confirming_rerun_names_the_runs_by_their_short_ids(orch: Orch, store: Store, tmp_path: Path) -> None:
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "fails-on-rerun.yaml").write_text(SUITE)
    base, head = _run(store, 100.0, 1), _run(store, 130.0, 2)
    res = orch("runs", "check", "latest", "--base", "latest~1", "--confirm", "--suite-dir", str(suites), timeout=300)
    assert res.returncode == 1, res.stdout + res.stderr
    [rerun] = [r.id for r in store.list_runs(limit=10).items if r.id not in (base, head)]
    text = " ".join(res.stderr.split())
    assert f"the confirming rerun {short_run_id(rerun)} of run {short_run_id(head)} is failed" in text, res.stderr
    assert f"orch runs show {short_run_id(rerun)}" in text, res.stderr
    assert head not in res.stderr and rerun not in res.stderr, res.stderr  # no 36-character id


def test_refusals_name_the_run_by_its_short_id(orch: Orch, store: Store, tmp_path: Path) -> None:
    """The finding: `runs rm` of a running run, `cancel` and `run --resume` of a finished run and `runs compare
    latest latest` printed the 36-character id (``hint: orch runs show 01a23ac1-...``)."""
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "fails-on-rerun.yaml").write_text(SUITE)
    done = store.create_run(suite="fails-on-rerun", params={}, preset=None, label=None, hosts=["localhost"],
                            started_by="t@box", started_on="box")  # fmt: skip
    store.start_host_run(done, "localhost", facts={"gpus": []}, agent_version="v", build_sha=None)
    store.ingest(done, "localhost", [Event(seq=0, type="done", data={"status": "completed",
                                                                     "counts": {"results": 0, "errors": 0}})])
    store.finish_host_run(done, "localhost", "completed")
    store.finish_run(done, "completed")
    running = store.create_run(suite="fails-on-rerun", params={}, preset=None, label=None, hosts=["localhost"],
                               started_by="t@box", started_on="box")  # fmt: skip
    store.start_host_run(running, "localhost", facts={"gpus": []}, agent_version="v", build_sha=None)
    for args, rid in ((("runs", "rm", short_run_id(running), "--yes"), running),
                      (("cancel", short_run_id(done)), done),
                      (("run", "--resume", short_run_id(done)), done),
                      (("run", "--resume", short_run_id(done), "--suite-dir", str(suites)), done),
                      (("runs", "compare", short_run_id(done), short_run_id(done)), done)):  # fmt: skip
        res = orch(*args)
        assert res.returncode == 2, (args, res.stdout + res.stderr)
        text = " ".join(res.stderr.split())
        assert short_run_id(rid) in text and rid not in text, (args, res.stderr)
