"""The three real recordings no test replayed (issue 19): the decode spool and ``orch doctor --json`` of the lent
H200 (docs/results/h200-decode.md, docs/results/h200.md) and the single-GPU moe-sweep spool of the 2x H200 run
(docs/results/h200x2.md) — through ``orch runs import`` (enrichment, ingest, reconciliation) and the store's
queries (SQLite and PostgreSQL), and the doctor's checks over the recorded nvidia-smi output, each against the
figures the run printed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator import doctor
from orchestrator.analysis.gpus import match_gpu
from orchestrator.analysis.plateau import moe_points, sweep_plateau
from orchestrator.facts import host_facts_summary
from orchestrator.inventory import Host
from orchestrator.protocol import parse_line
from orchestrator.runner import gpu_spec_for
from orchestrator.spool_import import import_spool
from orchestrator.store.repo import Store
from orchestrator.suites.registry import builtin_registry

FIX = Path(__file__).resolve().parents[1] / "fixtures"
HOST = Host(name="h200-0", group="h200")


def _replay(store: Store, spool: Path, suite: str) -> str:
    """``orch runs import`` of the recorded spool (the live path: enrichment, ingest, reconciliation), twice: the
    second stores nothing."""
    lines = spool.read_text().splitlines()
    events = [parse_line(line, expected_seq=i) for i, line in enumerate(lines)]
    assert events[0].type == "hello" and events[-1].type == "done"
    gpu = gpu_spec_for(HOST, host_facts_summary(events[0].data["facts"]), "cuda")
    assert gpu is not None and gpu.key == "h200"
    first = import_spool(store, spool, host=HOST.name, registry=builtin_registry())
    assert (first.suite, first.status, first.run_status, first.created_run) == (suite, "completed", "completed", True)
    assert first.lines == first.new_lines == len(lines)
    assert (first.results, first.errors) == (events[-1].data["counts"]["results"], 0)
    again = import_spool(store, spool, host=HOST.name, registry=builtin_registry())
    assert (again.new_lines, again.results, again.created_run) == (0, first.results, False)
    hr = store.get_run(first.run_id).host_run(HOST.name)
    assert hr is not None and (hr.status, hr.results, hr.errors) == ("completed", first.results, 0)
    return first.run_id


def test_h200_decode_replay(store: Store) -> None:
    rid = _replay(store, FIX / "h200" / "decode" / "events.jsonl", "decode")
    rows = {r.case["concurrency"]: r for r in store.results(rid, limit=100).items}
    assert sorted(rows) == [1, 4, 16, 64]
    printed = {  # C: TTFT ms, TPOT median ms, TPOT p99 ms, output tokens/s — docs/results/h200-decode.md
        1: (29.7, 8.20, 8.90, 121),
        4: (49.3, 7.25, 9.35, 487),
        16: (146, 12.2, 12.6, 1207),
        64: (573, 32.8, 34.1, 1729),
    }
    for c, (ttft, tpot, p99, tps) in printed.items():
        m = rows[c].metrics
        assert m["ttft_ms"]["value"] == pytest.approx(ttft, rel=0.005), c
        assert m["tpot_ms"]["value"] == pytest.approx(tpot, rel=0.005), c
        assert m["tpot_p99_ms"]["value"] == pytest.approx(p99, rel=0.005), c
        assert m["output_tokens_per_s"]["value"] == pytest.approx(tps, abs=0.5), c
        assert (m["ttft_ms"]["unit"], m["output_tokens_per_s"]["unit"]) == ("ms", "tok/s")
        # tokens/s is C sequences x 128 output tokens over the end-to-end time of the batch
        assert m["output_tokens_per_s"]["value"] == pytest.approx(c * 128 / (m["e2e_ms"]["value"] / 1e3), rel=0.02)
    assert {r.case["layers"] for r in rows.values()} == {3}  # 3 of kimi-k2's 61 layers: not its tokens/s
    series = store.series(suite="decode", metric="output_tokens_per_s", x="concurrency")
    [line] = series.lines
    assert [(p.x, round(p.y)) for p in line.points] == [(1, 121), (4, 487), (16, 1207), (64, 1729)]
    assert series.unit == "tok/s"


def test_h200x2_single_gpu_moe_sweep_replay(store: Store) -> None:
    rid = _replay(store, FIX / "h200x2" / "moe-sweep" / "events.jsonl", "moe-sweep")
    rows = {r.case["M"]: r for r in store.results(rid, limit=100).items}
    assert sorted(rows) == [2**i for i in range(13)]
    printed = {  # M: one-GPU ms, one-GPU GB/s — the table in docs/results/h200x2.md
        1: (0.35, 2242),
        8: (1.88, 2851),
        64: (8.00, 3215),
        128: (9.76, 3276),
        256: (10.37, 3253),
        1024: (10.73, 3160),
        4096: (12.29, 2760),
    }
    for m, (ms, gbps) in printed.items():
        metrics = rows[m].metrics
        assert metrics["time_ms"]["value"] == pytest.approx(ms, abs=0.006), m
        assert metrics["gbps"]["value"] == pytest.approx(gbps, abs=1), m
        assert metrics["pct_peak"]["value"] == pytest.approx(100 * metrics["gbps"]["value"] / 4800, rel=1e-6), m
    assert rows[1].metrics["distinct_experts"]["value"] == 9 and rows[4096].metrics["distinct_experts"]["value"] == 385
    # issue 11's definitions: flat from where every expert is streamed once, compute-bound where it leaves that level
    plateau = sweep_plateau(moe_points((r.case, r.metrics) for r in rows.values()))
    assert plateau.plateau_from_m in (128, 256) and plateau.compute_bound_from_m in (2048, 4096), plateau


def _doctor_check(name: str) -> dict[str, Any]:
    report = json.loads((FIX / "h200" / "doctor.json").read_text())
    [host] = report["hosts"]
    return {c["name"]: c for c in host["checks"]}[name]


def test_h200_doctor_json_keeps_the_documented_shape() -> None:
    report = json.loads((FIX / "h200" / "doctor.json").read_text())
    [host] = report["hosts"]
    assert (host["host"], host["address"], host["port"], host["ok"]) == ("h200-0", "127.0.0.1", 2222, True)
    assert [c["name"] for c in host["checks"]] == list(doctor.CHECK_NAMES)
    assert {c["status"] for c in host["checks"]} == {"ok"}
    hk = _doctor_check("hostkey")
    assert hk["verdict"] == "match" and [k["fingerprint"] for k in hk["known"]] == [hk["offered_fingerprint"]]
    assert (hk["known"][0]["file"], hk["known"][0]["line"]) == ("/root/.ssh/known_hosts", 1)


def test_h200_doctor_checks_replayed_from_the_recorded_nvidia_smi() -> None:
    """The doctor's facts checks, fed what the H200 reported (nvidia-smi in orch's query, recorded in the same
    session as tests/fixtures/nvidia-smi/h200x1_header.csv: the same GPU UUID), give exactly what it printed."""
    py, gpus, disk, agent = (_doctor_check(n) for n in ("python", "gpus", "disk", "agent"))
    smi = (FIX / "nvidia-smi" / "h200x1_header.csv").read_text()
    facts = {
        "nvidia_smi": {"found": True, "rc": 0, "stdout": smi, "stderr": ""},
        "python": {"executable": py["executable"], "version": py["version"]},
        "torch": {"ok": True, "version": py["torch"], "cuda_available": py["cuda_available"],
                  "cuda_version": py["cuda_version"], "device_count": 1, "error": None},
        "disk": {"path": disk["path"], "free_bytes": disk["free_bytes"], "total_bytes": disk["total_bytes"]},
        "orch": {"agents": agent["agents"], "builds": agent["builds"], "current_build": agent["current_build"]},
    }  # fmt: skip
    assert doctor.gpus_check(facts).to_dict() == {**gpus, "exit_status": 0}  # nvidia-smi's exit, added since
    assert doctor.python_check(facts, py["interpreter"]).to_dict() == py
    assert doctor.disk_check(facts).to_dict() == disk
    assert doctor.agent_check(facts, None).to_dict() == agent
    spec = match_gpu(gpus["gpus"][0]["name"], None)
    assert spec is not None and (spec.key, spec.mem_bw_gbps) == ("h200", 4800)
