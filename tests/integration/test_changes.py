"""Change points over stored history (Apache Otava) on SQLite and a real PostgreSQL: found, stored, served by
``/api/v1/changes`` (real uvicorn) and printed by ``orch runs changes``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

from orchestrator.protocol import Event
from orchestrator.settings import Settings
from orchestrator.store.changes_repo import detect_changes, stored_changes
from orchestrator.store.repo import Store


def _history(store: Store, levels: list[float], *, host: str, seed: int) -> list[str]:
    """One moe-sweep run per level on ``host`` with one result (M=1) whose median is the level plus 0.5% noise."""
    rng = np.random.default_rng(seed)
    store.upsert_host(host, address=None, group="g", labels={})
    ids = []
    for level in levels:
        rid = store.create_run(suite="moe-sweep", params={}, preset=None, label=None, hosts=[host],
                               started_by="me", started_on="box")  # fmt: skip
        store.start_host_run(rid, host, facts={}, agent_version="v1", build_sha=None)
        t = float(rng.normal(level, level * 0.005))
        ev = Event(seq=0, type="result", ts=1.7e9,
                   data={"case_index": 0, "case": {"M": 1, "E": 8}, "metrics": {"time_ms": {"value": t, "unit": "ms",
                                                                                        "median": t}}})  # fmt: skip
        assert store.ingest(rid, host, [ev]) == 1
        ids.append(rid)
    return ids


def test_two_shifts_found_none_in_a_flat_series_stored_and_served(
    store: Store, serve: Callable[[Settings, Store], str]
) -> None:
    shifted = _history(store, [1.0] * 20 + [1.1] * 20 + [0.95] * 20, host="h1", seed=0)
    _history(store, [2.0] * 40, host="h2", seed=1)
    report = detect_changes(store, "moe-sweep", "time_ms")
    assert (report.series, report.points) == (2, 100)
    found = [(c.host, c.run_id, c.position) for c in report.changes]
    assert found == [("h1", shifted[20], 20), ("h1", shifted[40], 40)]
    first, second = report.changes
    assert first.case == {"M": 1, "E": 8} and 0.08 < (first.change or 0) < 0.12 and -0.16 < (second.change or 0) < -0.11
    assert first.p_value is not None and first.p_value <= 0.001
    # stored; a second scan replaces rather than adds
    detect_changes(store, "moe-sweep", "time_ms")
    assert [(c.host, c.position) for c in stored_changes(store, suite="moe-sweep")] == [("h1", 40), ("h1", 20)]
    assert stored_changes(store, suite="moe-sweep", host="h2") == []
    url = serve(Settings(), store)
    with httpx.Client(base_url=url, timeout=30) as c:
        rows = c.get("/api/v1/changes", params={"suite": "moe-sweep", "metric": "time_ms"}).json()
        want = [("h1", shifted[40], 40), ("h1", shifted[20], 20)]
        assert [(r["host"], r["run_id"], r["position"]) for r in rows] == want
        assert c.get("/api/v1/changes", params={"run": shifted[20]}).json()[0]["before"] == first.before
        assert c.get("/api/v1/changes", params={"metric": "bad name"}).status_code == 422
        other = c.get("/api/v1/changes", params={"suite": "other"})  # no run of it: 400 naming the stored suites
        assert other.status_code == 400 and "suites with stored runs: moe-sweep" in other.json()["detail"]
        nosuch = c.get("/api/v1/changes", params={"suite": "moe-sweep", "metric": "nosuch"})
        assert nosuch.status_code == 400 and "metrics stored: " in nosuch.json()["detail"]
        assert c.get("/api/v1/changes", params={"suite": "moe-sweep", "host": "h2"}).json() == []  # known, none
        nohost = c.get("/api/v1/changes", params={"suite": "moe-sweep", "host": "h9"})
        assert nohost.status_code == 400 and nohost.json()["detail"] == (
            "no result of suite 'moe-sweep' was measured on host 'h9' (hosts with results: h1, h2)"
        ), nohost.json()


def test_orch_runs_changes_cli(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'orch.db'}"
    store = Store.from_url(url)
    store.upgrade()
    try:
        shifted = _history(store, [1.0] * 20 + [1.2] * 20, host="h1", seed=2)
    finally:
        store.close()
    env = {**os.environ, "ORCH_DB_URL": url, "COLUMNS": "160"}
    argv = [sys.executable, "-m", "orchestrator", "runs", "changes", "--suite", "moe-sweep", "--metric", "time_ms"]
    res = subprocess.run([*argv, "--json"], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [(c["host"], c["run_id"], c["position"]) for c in doc["changes"]] == [("h1", shifted[20], 20)]
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0 and shifted[20][-8:] in res.stdout and "+20." in res.stdout, res.stdout
    res = subprocess.run([*argv[:-1], "no-such"], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 2 and "no-such" in res.stderr and "Traceback" not in res.stderr, res.stderr
    # an unknown host, or a metric the host's results lack: exit 2 naming the known ones (not "0 series")
    res = subprocess.run([*argv, "--host", "nohost"], env=env, capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert "no result of suite 'moe-sweep' was measured on host 'nohost'" in res.stderr
    assert "hosts with results: h1" in res.stderr and "Traceback" not in res.stderr
    res = subprocess.run([*argv[:-1], "nosuch", "--host", "h1"], env=env, capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)  # fmt: skip
    assert res.returncode == 2 and "metrics stored: time_ms" in res.stderr, res.stdout + res.stderr
