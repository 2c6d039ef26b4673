"""``orch runs show`` (real CLI entry point, real SQLite store) on "% of roof": a figure above 100 is marked
``cache`` with the reason (a cache-resident working set) in the table, a note and the API's ``roof_note``; and the
roof used — the host's latest hbm-bandwidth run at query time, even one measured after the sweep — is named by
its short id and date."""

from __future__ import annotations

import json

import pytest

from orchestrator.api.schemas import ResultOut, RunDetailOut
from orchestrator.protocol import Event
from orchestrator.runner import enrich_event
from orchestrator.store.compute import short_run_id
from orchestrator.store.repo import Store
from tests.e2e.conftest import TINY_CASE, finished_run, sqlite_db
from tests.e2e.test_untrusted_text import _orch

TINY = TINY_CASE
db = pytest.fixture(sqlite_db, name="db")


def _run(store: Store, suite: str, events: list[Event]) -> str:
    return finished_run(store, suite, "gpu-0", events)


def test_above_the_roof_is_marked_cache_and_the_roof_run_is_named(db: tuple[str, Store]) -> None:
    url, store = db
    times = {1: 0.01, 64: 1.0}  # M=1: ~1.2 MB of weights in 0.01 ms (cache speed); M=64: all 6.7 MB in 1 ms
    sweep = _run(store, "moe-sweep", [
        enrich_event("moe-sweep", Event(seq=i, type="result", data={
            "case": {"M": m, **TINY}, "metrics": {"time_ms": {"value": t, "unit": "ms"}}}), None)
        for i, (m, t) in enumerate(sorted(times.items()))
    ])  # fmt: skip
    code, text = _orch(url, "runs", "show", sweep)
    assert code == 0 and "% of roof is - : no hbm-bandwidth run on gpu-0 yet" in " ".join(text.split())
    # the roof is measured after the sweep: it still applies, at query time, and says which run it came from
    roof_run = _run(store, "hbm-bandwidth", [Event(seq=0, type="result", data={
        "case": {"size_bytes": 1 << 28}, "metrics": {"gbps": {"value": 20.0, "unit": "GB/s"}}})])  # fmt: skip
    results = {r.m: r for r in store.results(sweep).items}
    gbps = {m: r.metrics["gbps"]["value"] for m, r in results.items()}
    assert gbps[1] / 20.0 * 100 > 100 > gbps[64] / 20.0 * 100  # the premise: M=1 above the roof, M=64 below
    assert results[1].roof_note is not None and results[1].roof_note.startswith(
        f"{gbps[1] / 20.0 * 100:.0f}% of the copy roof: a cache-resident working set ("
    )
    assert results[64].roof_note is None and results[1].roof_run_id == results[64].roof_run_id == roof_run
    api = ResultOut.model_validate(results[1]).model_dump()
    assert api["roof_note"] == results[1].roof_note and api["roof_run_id"] == roof_run
    host = RunDetailOut.model_validate(store.get_run(sweep)).model_dump()["host_runs"][0]
    assert host["roof_run_id"] == roof_run and host["measured_roof_gbps"] == 20.0

    code, text = _orch(url, "runs", "show", sweep)
    assert code == 0, text
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") >= 4}
    assert "cache" in rows["1"] and "cache" not in rows["64"]
    flat = " ".join(text.split())
    started = store.get_run(roof_run).started_at
    assert (
        f"% of roof = gbps / 20.0 GB/s, the copy roof of hbm-bandwidth run {short_run_id(roof_run)} of "
        f"{started:%Y-%m-%d %H:%M} UTC: gpu-0's latest at the time you read this, which may have been measured "
        "after this run" in flat
    )
    assert "% of roof above 100 (marked cache) at M=1: a cache-resident working set" in flat
    doc = json.loads(_orch(url, "runs", "show", sweep, "--json")[1])
    by_m = {r["m"]: r for r in doc["results"]}
    assert by_m[1]["roof_note"] == results[1].roof_note and by_m[64]["roof_note"] is None


@pytest.mark.parametrize(("device", "words"), [("cpu", "the CPU's caches"), ("cuda", "the GPU's cache")])
def test_the_cache_note_names_the_device_that_measured(db: tuple[str, Store], device: str, words: str) -> None:
    """On a CPU host the weights stay in the CPU's caches, not "the GPU's cache" (what the note said there)."""
    url, store = db
    sweep = _run(store, "moe-sweep", [
        enrich_event("moe-sweep", Event(seq=0, type="result", data={
            "case": {"M": 1, **TINY}, "metrics": {"time_ms": {"value": 0.01, "unit": "ms"}},
            "info": {"device": device}}), None)
    ])  # fmt: skip
    _run(store, "hbm-bandwidth", [Event(seq=0, type="result", data={
        "case": {"size_bytes": 1 << 28}, "metrics": {"gbps": {"value": 20.0, "unit": "GB/s"}}})])  # fmt: skip
    (result,) = store.results(sweep).items
    assert result.roof_note is not None and f"the weights stay in {words} between calls" in result.roof_note
    code, text = _orch(url, "runs", "show", sweep)
    flat = " ".join(text.split())
    assert code == 0 and f"a cache-resident working set — the layer's weights stay in {words} between calls" in flat
    other = "the GPU's cache" if device == "cpu" else "the CPU's caches"
    assert other not in flat
