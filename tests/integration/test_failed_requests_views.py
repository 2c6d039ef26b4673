"""A serving result with failed requests is marked wherever it is read (issue 11 item 2): the store's results and
compare, the API's /results and /compare — on SQLite and PostgreSQL, through a real uvicorn server."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
from pydantic import SecretStr

from orchestrator.protocol import Event
from orchestrator.settings import Settings
from orchestrator.store.repo import Store
from tests.integration.conftest import WRITE_TOKEN


def _serving(store: Store, failed: dict[int, int]) -> str:
    """A finished run of a serving suite on h1: one result per concurrency C with p99 TTFT and failed_requests."""
    store.upsert_host("h1", address="h1.example", group="g", labels={})
    rid = store.create_run(suite="serve", params={}, preset=None, label=None, hosts=["h1"],
                           started_by="t@box", started_on="box")  # fmt: skip
    store.start_host_run(rid, "h1", facts={}, agent_version="v", build_sha=None)
    events = []
    for i, (c, n) in enumerate(sorted(failed.items())):
        info: dict[str, Any] = {"parser": "vllm-serve"}
        if n:
            info["warnings"] = [f"{n} of 1000 requests failed ({n / 10:.1f}%)"]
        metrics = {
            "p99_ttft_ms": {"value": 100.0 + c, "unit": "ms"},
            "failed_requests": {"value": float(n), "unit": "req"},
        }
        events.append(Event(seq=i, type="result", data={"case": {"C": c}, "metrics": metrics, "info": info}))
    store.ingest(rid, "h1", events)
    store.finish_host_run(rid, "h1", "completed")
    store.finish_run(rid, "completed")
    return rid


def test_failed_requests_are_marked_in_results_compare_and_the_api(
    store: Store, serve: Callable[[Settings, Store], str]
) -> None:
    base = _serving(store, {1: 0, 4: 0, 16: 3})
    head = _serving(store, {1: 0, 4: 5, 16: 0})
    rows = {r.case["C"]: r for r in store.results(head).items}
    assert rows[4].warnings == ["5 of 1000 requests failed (0.5%)"] and rows[1].warnings == []

    cmp = store.compare(base, head, metric="p99_ttft_ms")
    assert sorted((x.case["C"], x.warnings) for x in cmp.cases) == [
        (1, []),
        (4, ["head: 5 failed requests"]),
        (16, ["base: 3 failed requests"]),
    ]
    assert cmp.warned == 2

    url = serve(Settings(api_token=SecretStr(WRITE_TOKEN)), store)
    with httpx.Client(base_url=url, timeout=30) as c:
        items = c.get(f"/api/v1/runs/{head}/results").json()["items"]
        assert [(i["case"]["C"], i["warnings"]) for i in items] == [
            (1, []),
            (4, ["5 of 1000 requests failed (0.5%)"]),
            (16, []),
        ]
        body = c.get("/api/v1/compare", params={"base": base, "head": head, "metric": "p99_ttft_ms"}).json()
        assert sorted((x["case"]["C"], x["warnings"]) for x in body["cases"]) == [
            (1, []),
            (4, ["head: 5 failed requests"]),
            (16, ["base: 3 failed requests"]),
        ]
        assert body["warned"] == 2
