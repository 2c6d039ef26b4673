"""A user suite's results through the results API: parsed metrics with units, references, /series over concurrency."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx

from orchestrator.protocol import Event
from orchestrator.settings import Settings
from orchestrator.store.repo import Store
from orchestrator.suites.command import command_result
from orchestrator.suites.loader import parse_suite

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "engines"
SUITE = """\
name: serving
description: d
command: ["{build}/bin/bench", "--max-concurrency", "{concurrency}"]
params:
  concurrency: {type: list, default: [1, 16], help: "requests in flight"}
parser: sglang-serving
metrics:
  output_throughput: {}
  median_itl_ms: {}
references:
  "*": {output_throughput: ">= 3000 tok/s"}
"""


def test_user_suite_results_and_series_over_concurrency(store: Store, serve: Callable[[Settings, Store], str]) -> None:
    sd = parse_suite(SUITE, "serving.yaml")
    assert sd.command is not None
    lines = (FIX / "sglang_serving.jsonl").read_text().splitlines()
    rid = store.create_run(suite="serving", params={}, preset=None, label=None, hosts=["h1"],
                           started_by="t@box", started_on="box")  # fmt: skip
    store.start_host_run(rid, "h1", facts={}, agent_version="v", build_sha=None)
    events = []
    for i, (c, line) in enumerate(zip(sd.command.cases({"concurrency": [1, 16]}), lines, strict=True)):
        raw = Event(seq=i, type="result", data={
            "case_index": i, "case": c, "metrics": {"wall_ms": {"value": 60000.0, "unit": "ms"}},
            "info": {"stdout": line, "exit_status": 0},
        })  # fmt: skip
        events.append(command_result(sd.command, raw, "g"))
    store.ingest(rid, "h1", events)
    store.finish_host_run(rid, "h1", "completed")
    store.finish_run(rid, "completed")
    url = serve(Settings(), store)
    with httpx.Client(base_url=url, timeout=30) as c:
        page = c.get(f"/api/v1/runs/{rid}/results").json()
        first = page["items"][0]
        assert first["case"] == {"concurrency": 1} and first["concurrency"] == 1
        assert first["metrics"]["output_throughput"]["value"] == 2667.53
        assert first["metrics"]["median_itl_ms"]["unit"] == "ms"
        assert first["info"]["references"]["output_throughput"]["pass"] is False
        assert page["items"][1]["info"]["references"]["output_throughput"]["pass"] is True
        series = c.get("/api/v1/series", params={"suite": "serving", "metric": "output_throughput", "x": "concurrency"})
        assert series.status_code == 200, series.text
        doc = series.json()
        assert doc["unit"] == "tok/s"
        assert [(p["x"], p["y"]) for p in doc["lines"][0]["points"]] == [(1.0, 2667.53), (16.0, 4837.32)]
