"""``orch runs logs RUN --case N`` with N outside the run's cases (issue 21): a usage error, exit 2, naming the
valid range, before any host is asked (it was exit 1: the host's "kept no output for case N")."""

from __future__ import annotations

import pytest

from orchestrator.protocol import Event
from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch, local_orch, store_of

orch = pytest.fixture(local_orch, name="orch")
store = pytest.fixture(store_of, name="store")


def _run(store: Store, cases: int) -> str:
    """A completed run of a YAML suite on ``localhost`` whose agent announced ``cases`` cases (its hello line)."""
    store.upsert_host("localhost", address=None, group="local", labels={})
    rid = store.create_run(suite="my-echo", params={}, preset=None, label=None, hosts=["localhost"],
                           started_by="t@box", started_on="box")  # fmt: skip
    store.start_host_run(rid, "localhost", facts={}, agent_version="v", build_sha=None)
    store.ingest(rid, "localhost", [
        Event(seq=0, type="hello", data={"agent_version": "v", "run_id": rid, "suite": "my-echo", "facts": {},
                                         "cases_total": cases}),
        *(Event(seq=1 + i, type="result", data={"case": {"i": i}, "metrics": {"t": {"value": 1.0, "unit": "s"}}})
          for i in range(cases)),
    ])  # fmt: skip
    store.finish_host_run(rid, "localhost", "completed")
    store.finish_run(rid, "completed")
    return rid


@pytest.mark.parametrize("case", ["3", "99"])
def test_a_case_out_of_range_is_a_usage_error_naming_the_range(orch: Orch, store: Store, case: str) -> None:
    rid = _run(store, 3)
    res = orch("runs", "logs", rid[-8:], "--case", case, columns=100)
    assert res.returncode == 2, res.stdout + res.stderr
    err = " ".join(res.stderr.split())
    assert f"error: --case {case} is out of range: run {rid[-8:]} has 3 cases, numbered 0 to 2" in err, err
    assert "pass --case 0 to 2, or leave --case out for every case" in err and "Traceback" not in err
    assert res.stdout == ""


def test_the_api_route_answers_400_as_the_cli_exits_2(orch: Orch, store: Store) -> None:
    """``GET /api/v1/runs/{id}/logs?case=3`` of a 3-case run answered 200 with every host's "kept no output for
    case 3" while `orch runs logs --case 3` exits 2; a moe-sweep run (no command, no outputs) the same. Both are
    now 400 naming the range (or the suite), before any host is asked."""
    from fastapi.testclient import TestClient

    from orchestrator.api.app import create_app
    from orchestrator.settings import Settings

    rid = _run(store, 3)
    store.upsert_host("localhost", address=None, group="local", labels={})
    sweep = store.create_run(suite="moe-sweep", params={}, preset=None, label=None, hosts=["localhost"],
                             started_by="t@box", started_on="box")  # fmt: skip
    with TestClient(create_app(Settings(db_url=orch.db_url, inventory=orch.inventory))) as client:
        for case in (3, 99):
            r = client.get(f"/api/v1/runs/{rid}/logs", params={"case": case})
            assert r.status_code == 400, r.text
            assert f"case {case} is out of range: run {rid[-8:]} has 3 cases, numbered 0 to 2" in r.json()["detail"]
        r = client.get(f"/api/v1/runs/{sweep}/logs")
        assert r.status_code == 400 and "moe-sweep" in r.json()["detail"], r.text
        assert client.get(f"/api/v1/runs/{rid}/logs", params={"case": -1}).status_code == 422
