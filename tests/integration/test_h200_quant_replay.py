"""Replays the real spools of the quantized-MoE and overheads runs on the lent H200 (2026-11-30, see
docs/results/h200-quant.md) through parse, enrichment and the store on SQLite and PostgreSQL, checks the figures
those runs printed, and projects them with ``orch project`` (service, CLI and API)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from orchestrator.cli.main import main
from orchestrator.errors import ProjectionError
from orchestrator.facts import host_facts_summary
from orchestrator.inventory import Host
from orchestrator.projection_service import ProjectRequest, run_projection
from orchestrator.protocol import parse_line
from orchestrator.runner import enrich_event, gpu_spec_for
from orchestrator.settings import Settings
from orchestrator.store.repo import Store

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "h200-quant"
ONE, TWO = Host(name="h200-0", group="h200"), Host(name="h200x2-0", group="h200x2")
MS = [2**i for i in range(13)]


def _replay(store: Store, kind: str, suite: str, host: Host = ONE) -> str:
    lines = (FIX / kind / "events.jsonl").read_text().splitlines()
    events = [parse_line(line, expected_seq=i) for i, line in enumerate(lines)]
    assert events[0].type == "hello" and events[-1].type == "done"
    summary = host_facts_summary(events[0].data["facts"])
    gpu = gpu_spec_for(host, summary, "cuda")
    assert gpu is not None and gpu.key == "h200"
    rid = store.create_run(suite=suite, params={}, preset="kimi-k2", label=kind, hosts=[host.name],
                           started_by="replay@test", started_on="test")  # fmt: skip
    store.start_host_run(rid, host.name, facts=summary, agent_version="replay", build_sha=None)
    store.ingest(rid, host.name, [enrich_event(suite, e, gpu) for e in events])
    store.finish_host_run(rid, host.name, "completed")
    store.finish_run(rid, "completed")
    return rid


@pytest.fixture
def runs(store: Store) -> dict[str, str]:
    ids = {"hbm": _replay(store, "hbm", "hbm-bandwidth")}
    for dt in ("bf16", "fp8", "int4"):
        ids[dt] = _replay(store, f"moe-{dt}", "moe-sweep")
    ids["overheads"] = _replay(store, "overheads", "overheads")
    ids["x2-hbm"] = _replay(store, "x2-hbm", "hbm-bandwidth", TWO)
    ids["x2-overheads"] = _replay(store, "x2-overheads", "overheads", TWO)
    return ids


def _rows(store: Store, rid: str) -> dict[int, dict]:
    return {r.case["M"]: {"m": r.metrics, "info": r.info, "roof": r.pct_of_measured_roof}
            for r in store.results(rid, limit=100).items}  # fmt: skip


def test_quantized_sweeps_replay_with_scales_counted(store: Store, runs: dict[str, str]) -> None:
    bf16, fp8, int4 = (_rows(store, runs[d]) for d in ("bf16", "fp8", "int4"))
    assert sorted(bf16) == sorted(fp8) == sorted(int4) == MS
    # as printed (median ms): M=1 and the plateau
    assert bf16[1]["m"]["time_ms"]["median"] == pytest.approx(0.349, abs=0.001)
    assert fp8[1]["m"]["time_ms"]["median"] == pytest.approx(0.237, abs=0.001)
    assert int4[1]["m"]["time_ms"]["median"] == pytest.approx(0.223, abs=0.001)
    assert fp8[256]["m"]["time_ms"]["median"] == pytest.approx(6.42, abs=0.01)
    # weights streamed at M=1: 9 experts (8 routed + 1 shared) x bytes per expert with scales
    assert int4[1]["m"]["weight_bytes"]["value"] == 9 * 3 * 7168 * 2048 * 0.5625 == 222_953_472
    assert fp8[1]["m"]["weight_bytes"]["value"] == 9 * (3 * 7168 * 2048 + 4 * (2 * 2048 + 7168)) == 396_767_232
    assert bf16[1]["m"]["weight_bytes"]["value"] == 792_723_456
    # the targets, as measured: int4 M=1 is 0.64x bf16 (target <= 0.4x), 23.4% of the copy roof
    # (target >= 50%); fp8 at the plateau 61.5% of the roof (target >= 65%) — see docs/results/h200-quant.md
    ratio = int4[1]["m"]["time_ms"]["median"] / bf16[1]["m"]["time_ms"]["median"]
    assert ratio == pytest.approx(0.638, abs=0.005)
    assert int4[1]["roof"] == pytest.approx(23.4, abs=0.1)
    assert fp8[256]["roof"] == pytest.approx(61.5, abs=0.1)
    info = int4[1]["info"]
    assert info["impl"] == "triton_w4a16_grouped" and "variant gemv" in info["kernel"]
    assert set(info["kernel_choice"]) == {"gemv BLOCK_M=1", "fma BLOCK_M=1", "dot BLOCK_M=16"}
    assert "variant dot" in int4[8]["info"]["kernel"]  # from 8 tokens on, the tensor-core variant was faster
    assert info["check"]["ok"] is True and info["check"]["tolerance"] == 0.03
    assert fp8[1]["info"]["impl"] == "scaled_grouped_mm" and "row-wise" in fp8[1]["info"]["quant"]
    assert fp8[1]["info"]["check"]["max_rel_err"] == pytest.approx(0.045, abs=0.001)


def test_overheads_replay(store: Store, runs: dict[str, str]) -> None:
    [one] = store.results(runs["overheads"]).items
    [two] = store.results(runs["x2-overheads"]).items
    assert one.metrics["graph_node_us"]["median"] == pytest.approx(0.89, abs=0.01)
    assert one.metrics["launch_issue_us"]["median"] == pytest.approx(10.06, abs=0.01)
    assert one.info is not None
    assert one.info["skipped"] == {"allreduce_us": "1 GPU on this host: nothing to all-reduce across"}
    assert not any(k.startswith("allreduce_") for k in one.metrics)
    assert two.info is not None and two.info["allreduce"]["world_size"] == 2 and two.info["skipped"] == {}
    assert two.metrics["allreduce_graph_M1_us"]["median"] == pytest.approx(11.26, abs=0.01)
    assert two.metrics["allreduce_graph_M256_us"]["median"] == pytest.approx(37.24, abs=0.01)
    for m in (1, 256):  # eager per-call latency includes the two ranks' skew: far above the graph figure
        assert two.metrics[f"allreduce_eager_M{m}_us"]["median"] > 2 * two.metrics[f"allreduce_graph_M{m}_us"]["median"]


def test_project_h200_onto_itself_reproduces_and_checks_at_zero(store: Store, runs: dict[str, str]) -> None:
    out = run_projection(store, ProjectRequest(run=runs["bf16"], to="h200", layers=1, check=runs["bf16"]))
    measured = {m: r["m"]["time_ms"]["median"] for m, r in _rows(store, runs["bf16"]).items()}
    for r in out.projection.rows:
        assert r.moe_ms == pytest.approx(measured[r.M], rel=1e-12) and r.step_ms == pytest.approx(r.moe_ms)
    assert [c.error_pct for c in out.checked] == pytest.approx([0.0] * 13, abs=1e-9)


def test_project_int4_onto_b300_with_the_two_gpu_overheads(store: Store, runs: dict[str, str]) -> None:
    out = run_projection(
        store, ProjectRequest(run=runs["int4"], to="b300", overheads=runs["x2-overheads"], layers=61)
    )
    rec, proj = out.record, out.projection
    assert (rec.source_gpu, rec.target_gpu, rec.dtype) == ("h200", "b300", "int4")
    assert (proj.source.bw_gbps, proj.target.bw_gbps) == (4800, 8000)
    assert (proj.source.peak_tflops, proj.target.peak_tflops) == (989, 2250)  # int4 W4A16 runs on bf16 cores
    r1 = proj.rows[0]
    # M=1: ideal 222,953,472 B / 4800 GB/s = 46.4 µs against 792.7 MFLOP / 989 TFLOP/s = 0.80 µs
    t_mem, t_cmp = 222_953_472 / 4800e9, 2 * 9 * 3 * 7168 * 2048 / 989e12
    f = t_mem / (t_mem + t_cmp)
    assert r1.f_mem == pytest.approx(f) and f == pytest.approx(0.983, abs=0.001)
    assert r1.moe_ms == pytest.approx(0.222808 * (f * 4800 / 8000 + (1 - f) * 989 / 2250))
    # per layer: 2 all-reduces of M=1 in a graph (11.26 µs) + 8 graph nodes (0.915 µs)
    assert r1.overhead_ms == pytest.approx((2 * 11.26 + 8 * 0.91488) / 1000, rel=1e-3)
    assert r1.step_ms == pytest.approx(61 * (r1.moe_ms + r1.overhead_ms))
    assert 0.1 < r1.overhead_share < 0.3
    stored = store.results(runs["int4"]).items
    assert len(stored) == 13
    from orchestrator.store.projections import get_projection, list_projections

    again = get_projection(store, rec.id)
    assert again.rows["projected"][0]["moe_ms"] == pytest.approx(r1.moe_ms)
    assert again.inputs["formula"].startswith("t_mem = B/BW_src") and len(again.inputs["points"]) == 13
    assert list_projections(store, target_gpu="b300").total == 1


def test_project_refuses_what_it_cannot_project(store: Store, runs: dict[str, str]) -> None:
    with pytest.raises(ProjectionError, match="is a overheads run"):
        run_projection(store, ProjectRequest(run=runs["overheads"], to="b300"))
    with pytest.raises(ProjectionError, match="unknown target GPU 'b400'") as exc:
        run_projection(store, ProjectRequest(run=runs["bf16"], to="b400"))
    assert "b300" in exc.value.hint
    with pytest.raises(ProjectionError, match="no --target-roof given"):
        run_projection(store, ProjectRequest(run=runs["bf16"], to="b300", roof="measured"))
    with pytest.raises(ProjectionError, match="another layer shape or dtype"):
        run_projection(store, ProjectRequest(run=runs["bf16"], to="h200", check=runs["fp8"]))
    with pytest.raises(ProjectionError, match="has no dense tensor peak for fp8"):
        run_projection(store, ProjectRequest(run=runs["fp8"], to="rtx-pro-6000-maxq"))


def test_project_measured_roofs(store: Store, runs: dict[str, str]) -> None:
    out = run_projection(store, ProjectRequest(run=runs["fp8"], to="b300", roof="measured", target_roof_gbps=7000))
    assert out.projection.source.bw_gbps == pytest.approx(4274, abs=1)  # the replayed hbm-bandwidth run
    assert out.projection.target.bw_gbps == 7000 and out.projection.target.peak_tflops == 4500


def test_cli_project_prints_inputs_rows_and_check(
    store: Store, runs: dict[str, str], db_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--db", db_url, "project", "--run", runs["int4"], "--to", "rtx-pro-6000-server",
            "--overheads", runs["x2-overheads"], "--check", runs["int4"]]  # fmt: skip
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "formula: t_mem = B/BW_src" in out and "target rtx-pro-6000-server: BW 1,597 GB/s" in out
    assert "node 0.915 µs" in out and "M=1: 11.3 µs" in out and "(datasheet (NVIDIA RTX PRO 6000" in out
    assert "check against run" in out and "h200 -> rtx-pro-6000-server" in out
    with pytest.raises(SystemExit) as exc:
        main(["--db", db_url, "project", "--run", runs["bf16"], "--to", "h200", "--layers", "2", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["rows"]["projected"][0]["step_ms"] == pytest.approx(2 * doc["rows"]["projected"][0]["source_ms"])
    with pytest.raises(SystemExit) as exc:
        main(["--db", db_url, "project", "--run", runs["bf16"], "--to", "b400"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "unknown target GPU 'b400'" in err and "Traceback" not in err


def test_api_serves_projections(
    store: Store, runs: dict[str, str], serve: Callable[[Settings, Store], str]
) -> None:
    rec = run_projection(store, ProjectRequest(run=runs["int4"], to="b300", overheads=runs["x2-overheads"])).record
    with httpx.Client(base_url=serve(Settings(), store), timeout=30) as c:
        page = c.get("/api/v1/projections", params={"target": "b300"}).json()
        assert page["total"] == 1 and page["items"][0]["id"] == rec.id
        one = c.get(f"/api/v1/projections/{rec.id}").json()
        assert one["source_run_id"] == runs["int4"] and len(one["rows"]["projected"]) == 13
        assert c.get("/api/v1/projections", params={"target": "B 300"}).status_code == 422
        missing = c.get("/api/v1/projections/01a22b5b-0000-7000-8000-000000000000")
        assert missing.status_code == 404 and "no projection" in missing.json()["detail"]


def test_runs_show_lists_overheads_one_item_per_row(
    store: Store, runs: dict[str, str], db_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "150")
    with pytest.raises(SystemExit) as exc:
        main(["--db", db_url, "runs", "show", runs["overheads"]])
    assert exc.value.code == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if "graph_node_us" in line)
    assert "0.89" in row and "us" in row
    skipped = next(line for line in lines if "allreduce_us" in line)
    assert "skipped" in skipped and "1 GPU on this host" in skipped
