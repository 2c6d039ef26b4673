"""Replays the real spools of the 2x H200 run (docs/results/h200x2.md) through parse, enrichment and the store,
and checks nccl-tests' arithmetic on every recorded all-reduce size and the figures the run printed."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from orchestrator.facts import host_facts_summary
from orchestrator.inventory import Host
from orchestrator.protocol import parse_line
from orchestrator.spool_import import import_spool
from orchestrator.store.repo import Store
from orchestrator.suites.registry import builtin_registry

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "h200x2"
HOST = Host(name="h200-0", group="h200")


def _ingest(store: Store, suite: str) -> str:
    """``orch runs import`` of the recorded spool: the same path as a live run's follow loop."""
    spool = FIX / suite / "events.jsonl"
    summary = host_facts_summary(parse_line(spool.read_text().splitlines()[0], expected_seq=0).data["facts"])
    assert summary["gpu_count"] == 2 and len(set(summary["gpu_uuids"])) == 2
    out = import_spool(store, spool, host=HOST.name, registry=builtin_registry())
    assert (out.suite, out.status, out.errors) == (suite, "completed", 0), out
    return out.run_id


def test_allreduce_rows_follow_nccl_tests_definitions(store: Store) -> None:
    rows = store.results(_ingest(store, "allreduce"), limit=100, samples=True).items
    assert len(rows) == 31 and sorted(r.case["size_bytes"] for r in rows) == [8 * 2**i for i in range(31)]
    n = 2
    for r in rows:
        size, m = r.case["size_bytes"], r.metrics
        # algbw is the median over the timed samples of bytes / 1e9 / seconds (3 significant digits kept)
        per_sample = [size / 1e9 / (t / 1e6) for t in m["time_us"]["samples"]]
        assert m["algbw_gbps"]["value"] == pytest.approx(statistics.median(per_sample), rel=5e-3)
        assert m["busbw_gbps"]["value"] == pytest.approx(m["algbw_gbps"]["value"] * 2 * (n - 1) / n, rel=1e-9)
        assert m["wrong"]["value"] == 0
    peak = max(r.metrics["busbw_gbps"]["value"] for r in rows)
    assert peak == pytest.approx(346, abs=1)  # printed: 346 GB/s at 4 GiB


def test_expert_parallel_sweep_per_gpu_figures(store: Store) -> None:
    rows = {r.case["M"]: r for r in store.results(_ingest(store, "moe-sweep-ep"), limit=100).items}
    r = rows[256]
    assert r.metrics["time_ms"]["value"] == pytest.approx(5.52, rel=0.01)
    assert r.metrics["gbps"]["value"] == pytest.approx(6132, abs=1)
    assert r.metrics["gbps_per_gpu"]["value"] == pytest.approx(r.metrics["gbps"]["value"] / 2, rel=1e-9)
    assert r.info is not None and r.info["ep"] == 2 and r.info["backend"] == "nccl"
