"""The dashboard's API (GET /api/v1/views, /resolve, /runs/{id}/flags) and its assets, through a real uvicorn
server on SQLite and PostgreSQL: the views are analysis/views.py's over the stored results; Plotly.js is the
plotly package's own file; bad input is a 4xx naming the problem."""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources

import httpx
from pydantic import SecretStr

from orchestrator.protocol import Event
from orchestrator.settings import Settings
from orchestrator.store.repo import Store
from tests.integration.conftest import WRITE_TOKEN, seed


def _flagged_run(store: Store) -> str:
    rid = store.create_run(suite="moe-sweep", params={}, preset=None, label="hot", hosts=["h9"],
                           started_by="t@box", started_on="box")  # fmt: skip
    store.start_host_run(rid, "h9", facts={"gpu_name": "NVIDIA H200"}, agent_version="v", build_sha=None)
    info = {"throttled": True, "shared_gpu": False, "throttle_reason": "power cap in 5/50 samples"}
    store.ingest(rid, "h9", [Event(seq=i, type="result", data={
        "case": {"M": m}, "metrics": {"time_ms": {"value": 1.0 + i, "unit": "ms"}}, "info": info if m == 2 else {}})
        for i, m in enumerate((1, 2, 4))])  # fmt: skip
    store.finish_host_run(rid, "h9", "completed")
    store.set_run_info(rid, {"fleet": {"differences": [
        {"group": "g", "field": "driver", "host": "h9", "value": "570.1", "majority": "580.2"}]}})  # fmt: skip
    store.finish_run(rid, "completed")
    return rid


def test_views_resolve_flags_and_assets(store: Store, serve: Callable[[Settings, Store], str]) -> None:
    ids = seed(store)
    hot = _flagged_run(store)
    url = serve(Settings(api_token=SecretStr(WRITE_TOKEN)), store)
    with httpx.Client(base_url=url, timeout=30) as c:
        short_base = ids["base"].replace("-", "")[-8:]
        v = c.get("/api/v1/views", params={"run": [short_base, ids["head"]]}).json()
        assert [r["id"] for r in v["runs"]] == [ids["base"], ids["head"]]
        # seed()'s results carry time_ms and gbps (no tflops): the headline views present, in the suite's order
        assert [x["metric"] for x in v["views"]] == ["gbps", "time_ms"]
        time_view = v["views"][1]
        assert [t["name"] for t in time_view["traces"]] == ["h1 · base", "h2 · base", "h1 · head", "h2 · head"]
        stored = {r.case["M"]: r.metrics["time_ms"]["median"] for r in store.results(ids["head"], host="h2").items}
        assert {p["x"]: p["y"] for p in time_view["traces"][3]["points"]} == stored
        assert time_view["x_axis"]["log"] is False and time_view["unit"] == "ms"
        one = c.get("/api/v1/views", params={"run": hot, "metric": "time_ms"}).json()
        [trace] = one["views"][0]["traces"]
        assert [p["flags"] for p in trace["points"]] == [[], ["throttled: power cap in 5/50 samples"], []]

        bad = c.get("/api/v1/views", params={"run": ids["base"], "metric": "nope"})
        assert bad.status_code == 400 and "no result of the run(s) has metric 'nope'" in bad.json()["detail"]
        mixed = c.get("/api/v1/views", params={"run": [ids["base"], ids["hbm"]]})
        assert mixed.status_code == 400 and "different suites" in mixed.json()["detail"]
        assert c.get("/api/v1/views", params={"run": "zzzz"}).status_code == 422  # malformed: 422 naming the forms
        assert c.get("/api/v1/views", params={"run": "abcdef12"}).status_code == 404

        assert c.get("/api/v1/resolve", params={"ref": short_base}).json()["id"] == ids["base"]
        assert c.get("/api/v1/resolve", params={"ref": "latest"}).json()["id"] == hot
        assert c.get("/api/v1/resolve", params={"ref": "latest~99"}).status_code == 404

        flags = c.get(f"/api/v1/runs/{hot}/flags").json()
        assert [(f["case"], f["throttled"], f["reason"]) for f in flags["cases"]] == \
            [({"M": 2}, True, "power cap in 5/50 samples")]  # fmt: skip
        assert flags["fleet_differences"][0]["field"] == "driver"
        assert c.get(f"/api/v1/runs/{ids['base']}/flags").json() == \
            {"run_id": ids["base"], "cases": [], "fleet_differences": []}  # fmt: skip

        js = c.get("/assets/plotly.min.js")
        assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
        assert js.content == resources.files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()
        assert c.get("/assets/nope.js").status_code == 404
        for path in (f"/runs/{short_base}", f"/compare?base={short_base}&head=x", "/hosts/h1", "/series?suite=s"):
            page = c.get(path)
            assert page.status_code == 200 and '<script src="/assets/dash.js"></script>' in page.text, path


def test_the_recorded_expert_parallel_sweep_plots_rates_not_parameters(
    store: Store, serve: Callable[[Settings, Store], str]
) -> None:
    """The 2x H200 moe-sweep-ep spool (docs/results/h200x2.md) as `orch runs import` stores it: GB/s (all GPUs and
    per GPU, against one H200's roofs) and TFLOP/s, never distinct_experts or ep_gpus."""
    from pathlib import Path

    from orchestrator.spool_import import import_spool
    from orchestrator.suites.registry import builtin_registry

    spool = Path(__file__).resolve().parents[1] / "fixtures" / "h200x2" / "moe-sweep-ep" / "events.jsonl"
    rid = import_spool(store, spool, host="h200x2-0", registry=builtin_registry()).run_id
    url = serve(Settings(), store)
    v = httpx.get(f"{url}/api/v1/views", params={"run": rid}, timeout=30).json()
    assert [x["metric"] for x in v["views"]] == ["gbps", "gbps_per_gpu", "tflops", "us_per_token", "time_ms"]
    assert {"distinct_experts", "ep_gpus"} <= set(v["metrics"])  # stored, offered in the picker, not a headline
    per_gpu = v["views"][1]
    assert [r["label"] for r in per_gpu["refs"]] == ["H200 SXM datasheet 4,800 GB/s"]  # no copy roof for this host
    assert [(t["name"], len(t["points"])) for t in per_gpu["traces"]] == [("h200x2-0", 13)]
    assert per_gpu["unit"] == "GB/s" and per_gpu["x_axis"]["ticktext"][-1] == "4096"
