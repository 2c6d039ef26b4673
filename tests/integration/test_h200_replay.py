"""Replays the real event streams of the GPU run on the lent H200 (2026-11-29, see docs/results/h200.md) —
the agent's spool files as written there — through ``orch runs import`` (the runner's enrichment, the store's
ingest, the reconciliation), the analysis and the store's queries, on SQLite and PostgreSQL, and checks the figures
that run printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.facts import host_facts_summary
from orchestrator.inventory import Host
from orchestrator.protocol import parse_line
from orchestrator.rundoc import run_document
from orchestrator.spool_import import import_spool
from orchestrator.store.repo import Store
from orchestrator.suites.registry import builtin_registry

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "h200"
HOST = Host(name="h200-0", group="h200")


def _replay(store: Store, kind: str, suite: str) -> str:
    """``orch runs import`` of the recorded spool (twice: the second stores nothing), as for an air-gapped host."""
    spool = FIX / kind / "events.jsonl"
    lines = spool.read_text().splitlines()
    first = import_spool(store, spool, host=HOST.name, registry=builtin_registry())
    assert (first.suite, first.status, first.run_status, first.created_run) == (suite, "completed", "completed", True)
    assert first.lines == first.new_lines == len(lines)
    assert first.results == sum('"type":"result"' in line for line in lines) and first.errors == 0
    again = import_spool(store, spool, host=HOST.name, registry=builtin_registry())
    assert (again.new_lines, again.results, again.status, again.created_run) == (0, first.results, "completed", False)
    rec = store.get_run(first.run_id).host_run(HOST.name)
    assert rec is not None and rec.facts is not None and rec.facts["gpu_name"] == "NVIDIA H200"
    return first.run_id


def test_h200_facts_name_the_gpu() -> None:
    lines = (FIX / "moe" / "events.jsonl").read_text().splitlines()
    summary = host_facts_summary(parse_line(lines[0], expected_seq=0).data["facts"])
    assert summary["gpu_name"] == "NVIDIA H200"
    assert summary["driver"] == "580.159.04"
    assert summary["torch"] == "2.11.0+cu130"
    assert summary["gpus"][0]["memory_mib"] == 143771


@pytest.mark.torch
def test_h200_run_figures_replay(store: Store) -> None:
    hbm = _replay(store, "hbm", "hbm-bandwidth")
    [copy] = store.results(hbm).items
    assert copy.metrics["gbps"]["value"] == pytest.approx(4274, abs=0.5)  # printed: 4,274 GB/s
    assert copy.metrics["pct_peak"]["value"] == pytest.approx(89.0, abs=0.05)  # of the 4800 GB/s datasheet

    moe = _replay(store, "moe", "moe-sweep")
    rows = {r.case["M"]: r for r in store.results(moe).items}
    assert sorted(rows) == [2**i for i in range(13)]
    printed = {  # M: (median ms, µs/token, GB/s, % of peak, % of measured roof, TFLOP/s) as the run printed
        1: (0.35, 350, 2265, 47.2, 53.0, 2.26),
        64: (7.96, 124, 3230, 67.3, 75.6, 6.37),
        128: (9.76, 76.2, 3277, 68.3, 76.7, 10.4),
        256: (10.4, 40.8, 3231, 67.3, 75.6, 19.4),
        4096: (12.2, 2.98, 2775, 57.8, 64.9, 266),
    }
    for m, (ms, us, gbps, pct, roof, tflops) in printed.items():
        r = rows[m]
        assert r.metrics["time_ms"]["value"] == pytest.approx(ms, rel=0.01), m
        assert r.metrics["us_per_token"]["value"] == pytest.approx(us, rel=0.01), m
        assert r.metrics["gbps"]["value"] == pytest.approx(gbps, abs=0.5), m
        assert r.metrics["pct_peak"]["value"] == pytest.approx(pct, abs=0.05), m
        assert r.pct_of_measured_roof == pytest.approx(roof, abs=0.05), m
        assert r.metrics["tflops"]["value"] == pytest.approx(tflops, rel=0.01), m
    # kimi-k2 with its shared expert: 9 experts at M=1 (792.7 MB bf16), all 385 at M=4096 (33.9 GB)
    assert rows[1].metrics["distinct_experts"]["value"] == 9
    assert rows[1].metrics["weight_bytes"]["value"] == 792_723_456
    assert rows[4096].metrics["distinct_experts"]["value"] == 385
    assert rows[4096].metrics["weight_bytes"]["value"] == 33_910_947_840
    assert rows[1].info is not None and rows[1].info["impl"] == "grouped_mm"
    assert rows[1].info["check"]["ok"] is True
    # issue 11: the run printed "plateau from M=2048" (a 10% band around the largest M's 12.2 ms); the memory-bound
    # plateau starts at M=128 (9.8-10.8 ms to M=1024) and compute takes over at M=4096 (12.2 ms, > 10.6 ms + 10%)
    doc = run_document(store.get_run(moe), store.results(moe, limit=100).items, full=True)
    [host] = doc["hosts"]
    assert (host["plateau_from_m"], host["compute_bound_from_m"]) == (128, 4096)
    assert host["plateau"]["level_ms"] == pytest.approx(10.60, abs=0.005) and host["plateau"]["reason"] is None
    assert len(doc["results"]) == 13 and doc["status"] == "completed" and host["results"] == 13
