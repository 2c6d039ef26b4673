"""Replays the real spools of issue 15's telemetry runs on the lent H200 (2026-11-30, docs/results/h200-telemetry.md):
the same kimi-k2 bf16 moe-sweep three times with ``--telemetry-ms 100`` and three times with ``--telemetry-ms 0``,
alternated. Imported with ``orch runs import`` (the path a spool copied off a host takes), they must store what the
live run stored: clocks, power and temperature per case, the throttle verdicts, and ``runs show`` listing them; and
the sampling's cost, recomputed from the stored medians, must stay within issue 15's 1%."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest

from orchestrator.cli.main import main
from orchestrator.store.repo import Store

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "h200-telemetry"
MS = [2**i for i in range(13)]
RUNS = ["on-1", "off-1", "on-2", "off-2", "on-3", "off-3"]


def _orch(capsys: pytest.CaptureFixture[str], db: str, *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as ex:
        main(["--db", db, *args])
    out = capsys.readouterr()
    return int(ex.value.code or 0), out.out + out.err


@pytest.fixture
def imported(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[str, dict]:
    monkeypatch.setenv("COLUMNS", "200")
    db = f"sqlite:///{tmp_path / 'orch.db'}"
    ids = {}
    for name in RUNS:
        code, out = _orch(capsys, db, "runs", "import", str(FIX / name / "events.jsonl"), "--host", "h200-0", "--json")
        assert code == 0, out
        ids[name] = json.loads(out)["run_id"]
    return db, ids


def _results(db: str, rid: str) -> dict[int, dict]:
    store = Store.from_url(db)
    try:
        return {r.case["M"]: {"metrics": r.metrics, "info": r.info} for r in store.results(rid, limit=100).items}
    finally:
        store.close()


def test_every_case_stores_clocks_power_and_temperature(imported: tuple[str, dict]) -> None:
    db, ids = imported
    rows = _results(db, ids["on-1"])
    assert sorted(rows) == MS
    for m, row in rows.items():
        tel = row["info"]["telemetry"]
        assert tel["interval_ms"] == 100 and tel["samples"] >= 1 and tel["error"] is None, m
        f = tel["fields"]
        assert f["clocks.mem"]["median"] == 3201.0 and f["clocks.sm"]["max"] <= 1980  # H200: SM 1980 MHz max
        assert 50 <= f["power.draw"]["median"] <= 700 and f["power.limit"]["median"] == 700.0
        assert 20 <= f["temperature.gpu"]["median"] <= 90
        if m > 1:
            assert f["clocks.sm"]["median"] >= 1900, m
    # M=1's window holds the sweep's set-up (weights allocated, graphs captured): mostly an idle GPU at 345 MHz,
    # which NVML reports as the idle reason (0x1), not as throttling
    assert rows[1]["info"]["telemetry"]["reasons"] == {"gpu_idle": 18} and not rows[1]["info"].get("throttled")
    # the live run called M >= 1024 throttled (SW power cap, NVML bit 0x4); the import judges the same
    flagged = {m for m, row in rows.items() if row["info"].get("throttled")}
    assert flagged == {1024, 2048, 4096}
    assert "power cap" in rows[4096]["info"]["throttle_reason"]
    assert not any(r["info"].get("shared_gpu") for r in rows.values())
    off = _results(db, ids["off-1"])
    assert sorted(off) == MS and not any("telemetry" in r["info"] for r in off.values())


def test_runs_show_lists_the_throttled_cases(imported: tuple[str, dict], capsys: pytest.CaptureFixture[str]) -> None:
    db, ids = imported
    code, out = _orch(capsys, db, "runs", "show", ids["on-1"])
    assert code == 0, out
    assert "GPU telemetry: 3 of 13 cases throttled or sharing the GPU" in out
    assert "M=4096" in out and "power cap in 6/6 samples" in out


def test_the_sampling_costs_under_one_percent(imported: tuple[str, dict]) -> None:
    db, ids = imported
    med = {name: {m: r["metrics"]["time_ms"]["median"] for m, r in _results(db, rid).items()} for name, rid in
           ids.items()}  # fmt: skip
    ratios = {m: statistics.median(med[f"on-{i}"][m] / med[f"off-{i}"][m] for i in (1, 2, 3)) for m in MS}
    geomean = math.exp(statistics.fmean(math.log(r) for r in ratios.values()))
    assert abs(geomean - 1) <= 0.01 and all(abs(r - 1) <= 0.01 for r in ratios.values()), ratios
    assert round(geomean, 4) == pytest.approx(1.0003, abs=2e-4)  # the figure in docs/results/h200-telemetry.md
