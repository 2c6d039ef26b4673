"""Store.compare with statistics from the raw samples, and calibrations, on SQLite and a real PostgreSQL."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from orchestrator.protocol import Event
from orchestrator.store.repo import Store
from orchestrator.store.stats_repo import calibrations, save_calibration


def _run_with(store: Store, centers: dict[int, float], *, rel_sd: float = 0.01, seed: int = 0, n: int = 20) -> str:
    """A moe-sweep run on host h1 with one result per M: ``n`` normal samples around ``centers[M]`` ms."""
    store.upsert_host("h1", address="h1.example", group="g", labels={})
    run_id = store.create_run(
        suite="moe-sweep", params={}, preset="tiny", label=None, hosts=["h1"], started_by="me@box", started_on="box"
    )
    store.start_host_run(run_id, "h1", facts={}, agent_version="v1", build_sha=None)
    rng = np.random.default_rng(seed)
    events = []
    for i, (m, center) in enumerate(sorted(centers.items())):
        xs = [float(x) for x in rng.normal(center, center * rel_sd, n)]
        med = float(np.median(xs))
        p10, p90 = (float(q) for q in np.quantile(xs, [0.1, 0.9]))
        metrics: dict[str, Any] = {
            "time_ms": {"value": med, "unit": "ms", "median": med, "p10": p10, "p90": p90, "n": n, "samples": xs}
        }
        events.append(
            Event(seq=i, type="result", ts=1_700_000_000.0 + i,
                  data={"case_index": i, "case": {"M": m, "E": 8}, "metrics": metrics})
        )  # fmt: skip
    assert store.ingest(run_id, "h1", events) == len(centers)
    return run_id


def test_compare_calls_a_five_percent_slowdown_from_the_samples(store: Store) -> None:
    base = _run_with(store, {1: 1.0, 8: 2.0, 64: 4.0}, seed=1)
    head = _run_with(store, {1: 1.0, 8: 2.1, 64: 4.0}, seed=2)  # M=8 5% slower
    cmp = store.compare(base, head)
    calls = {c.case["M"]: (c.stats.call if c.stats else None, c.verdict) for c in cmp.cases}
    noise = ("within noise", "within noise")
    assert calls == {1: noise, 8: ("slower", "regression"), 64: noise}
    assert (cmp.slower, cmp.faster, cmp.alpha, cmp.noise_floor) == (1, 0, 0.05, "within-run samples only")
    st = next(c.stats for c in cmp.cases if c.case["M"] == 8)
    assert st is not None and st.band_source == "within-run" and 1.0 + st.band < st.ci_low < 1.05 < st.ci_high
    assert st.q_value is not None and st.p_value is not None and st.q_value >= st.p_value
    assert (st.n_base, st.n_head) == (20, 20)
    # the same comparison twice gives the same intervals (seeded bootstrap)
    assert store.compare(base, head) == cmp


def test_calibration_widens_the_band_and_is_said(store: Store) -> None:
    centers = {1: 1.0, 8: 2.0}
    # three "identical" runs whose medians moved 8% apart at M=8: that host's run-to-run noise
    aa = [_run_with(store, {1: 1.0, 8: c}, seed=10 + i) for i, c in enumerate((2.0, 2.16, 2.05))]
    recs = save_calibration(store, "moe-sweep", "time_ms", aa)
    assert sorted((r.host, r.case["M"], r.n_runs) for r in recs) == [("h1", 1, 3), ("h1", 8, 3)]
    by_m = {r.case["M"]: r for r in calibrations(store, "moe-sweep", "time_ms")}
    assert by_m[8].aa_spread == pytest.approx(0.08, abs=0.02) and by_m[8].runs == aa
    assert by_m[1].aa_spread is not None and by_m[1].aa_spread < 0.02
    assert by_m[8].within_spread == pytest.approx(0.0128, abs=0.008)
    base = _run_with(store, centers, seed=1)
    head = _run_with(store, {1: 1.0, 8: 2.1}, seed=2)  # 5% slower: inside the calibrated 8%
    cmp = store.compare(base, head)
    st8 = next(c.stats for c in cmp.cases if c.case["M"] == 8)
    assert st8 is not None and st8.band_source == "calibration" and st8.band == pytest.approx(by_m[8].aa_spread)
    assert st8.call == "within noise" and cmp.noise_floor == "calibration" and cmp.slower == 0
    # calibrating again replaces the rows (one per host, case and metric)
    save_calibration(store, "moe-sweep", "time_ms", aa[:2])
    again = calibrations(store, "moe-sweep")
    assert len(again) == 2 and {r.n_runs for r in again} == {2}


def test_results_without_samples_keep_the_p10_p90_verdicts(store: Store) -> None:
    from tests.integration.conftest import result_event

    ids = []
    for t in (1.0, 2.0):
        store.upsert_host("h1", address=None, group="g", labels={})
        rid = store.create_run(suite="moe-sweep", params={}, preset=None, label=None, hosts=["h1"],
                               started_by="me", started_on="box")  # fmt: skip
        store.start_host_run(rid, "h1", facts={}, agent_version="v1", build_sha=None)
        ev = result_event(0, 1, t)
        ev.data["metrics"]["time_ms"].pop("samples")
        store.ingest(rid, "h1", [ev])
        ids.append(rid)
    cmp = store.compare(ids[0], ids[1])
    assert [(c.stats, c.verdict) for c in cmp.cases] == [(None, "regression")]
    assert cmp.noise_floor == "no raw samples stored; p10/p90 only"


def test_orch_runs_compare_says_the_noise_floor(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'orch.db'}"
    store = Store.from_url(url)
    store.upgrade()
    try:
        base = _run_with(store, {1: 1.0, 8: 2.0}, seed=1)
        head = _run_with(store, {1: 1.0, 8: 2.1}, seed=2)
    finally:
        store.close()
    env = {**os.environ, "ORCH_DB_URL": url, "COLUMNS": "200"}
    argv = [sys.executable, "-m", "orchestrator", "runs", "compare", base, head]
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "statistics: 1 slower, 0 faster at FDR 0.05; noise floor from within-run samples only (no calibration" in (
        res.stdout
    )
    assert "95% CI" in res.stdout and "regression" in res.stdout
    doc = json.loads(subprocess.run([*argv, "--json"], env=env, capture_output=True, text=True, timeout=120,
                                    cwd=tmp_path).stdout)  # fmt: skip
    assert doc["noise_floor"] == "within-run samples only" and doc["slower"] == 1
    st = next(c["stats"] for c in doc["cases"] if c["case"]["M"] == 8)
    assert st["call"] == "slower" and st["band_source"] == "within-run" and st["ci_low"] > 1 + st["band"]


def test_check_and_calibration_text(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    """The text of orch runs check --confirm and orch calibrate, drawn from real stored comparisons."""
    from orchestrator.cli import render_regress
    from orchestrator.regress import CalibrateOutcome, CheckOutcome
    from orchestrator.runner import HostOutcome, RunOutcome

    aa = [_run_with(store, {1: 1.0, 8: 2.0}, seed=20 + i) for i in range(2)]
    cal = CalibrateOutcome("moe-sweep", [RunOutcome(r, "moe-sweep", "completed", []) for r in aa],
                           save_calibration(store, "moe-sweep", "time_ms", aa))  # fmt: skip
    render_regress.calibration_table(cal)
    out = capsys.readouterr().out
    assert "calibration of moe-sweep" in out and "2 calibrations stored" in out and "M=8" in out
    base = _run_with(store, {1: 1.0, 8: 2.0}, seed=1)
    head = _run_with(store, {1: 1.1, 8: 2.2}, seed=2)  # both 10% slower
    again = _run_with(store, {1: 1.1, 8: 2.0}, seed=3)  # the rerun: only M=1 still slower
    cmp = store.compare(base, head)
    slower = [c for c in cmp.cases if c.stats is not None and c.stats.call == "slower"]
    recheck = store.compare(base, again)
    reproduced = [c for c in recheck.cases if c.stats is not None and c.stats.call == "slower"]
    rerun = RunOutcome(again, "moe-sweep", "completed", [HostOutcome("h1", "completed", 2)])
    out_check = CheckOutcome(cmp, slower, True, rerun, recheck, reproduced)
    assert out_check.regression and len(slower) == 2 and [c.case["M"] for c in reproduced] == [1]
    render_regress.check_outcome(out_check)
    text = capsys.readouterr().out
    assert re.search(r"\nreproduced: h1 M=1 E=8 rerun/base 1\.(09|10|11)\d\n", text), text
    assert "\nnot reproduced: h1 M=8 E=8\n" in text
    assert "regression confirmed: 1 of 2 flagged cases reproduced" in text
    doc = out_check.to_dict()
    assert [c["case"]["M"] for c in doc["not_reproduced"]] == [8] and doc["rerun_run_id"] == again


def _aa_run(store: Store, sd: dict[int, float], seed: int) -> str:
    """A moe-sweep run on h1: per M a measured time_ms (20 samples, relative sd ``sd[M]``), distinct_experts
    with 20 equal samples (a count), and activation_bytes without samples (derived from the case)."""
    store.upsert_host("h1", address="h1.example", group="g", labels={})
    run_id = store.create_run(
        suite="moe-sweep", params={}, preset="tiny", label=None, hosts=["h1"], started_by="me@box", started_on="box"
    )
    store.start_host_run(run_id, "h1", facts={}, agent_version="v1", build_sha=None)
    rng = np.random.default_rng(seed)
    events = []
    for i, (m, rel) in enumerate(sorted(sd.items())):
        xs = [float(abs(x)) for x in rng.normal(1.0, rel, 20)]
        p10, med, p90 = (float(q) for q in np.quantile(xs, [0.1, 0.5, 0.9]))
        metrics: dict[str, Any] = {
            "time_ms": {"value": med, "unit": "ms", "median": med, "p10": p10, "p90": p90, "n": 20, "samples": xs},
            "distinct_experts": {"value": 8, "unit": "experts", "median": 8, "p10": 8, "p90": 8, "samples": [8] * 20},
            "activation_bytes": {"value": 4096 * m, "unit": "B"},
        }
        events.append(Event(seq=i, type="result", data={"case": {"M": m, "E": 8}, "metrics": metrics}))
    assert store.ingest(run_id, "h1", events) == len(sd)
    return run_id


def test_calibrate_skips_constants_and_warns_of_wide_bands(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    """The finding: 56 calibrations stored from a --runs 2 tiny sweep, activation_bytes among them at 0.00%, bands
    up to 49772% with no warning. Metrics that do not vary are skipped with why; a band above 50% is named."""
    from orchestrator.cli import render_regress
    from orchestrator.regress import WIDE_BAND, CalibrateOutcome, _metric_names
    from orchestrator.runner import RunOutcome
    from orchestrator.store.stats_repo import metric_samples_kind

    sd = {1: 0.01, 8: 0.9}  # M=8: a host busy with other work
    aa = [_aa_run(store, sd, seed=30 + i) for i in range(2)]
    assert metric_samples_kind(store, aa[0]) == {
        "time_ms": "varies", "distinct_experts": "constant", "activation_bytes": "no samples"
    }  # fmt: skip
    metrics, skipped = _metric_names(store, aa[0])
    assert metrics == ["time_ms"] and skipped == {"distinct_experts": "constant", "activation_bytes": "no samples"}
    recs = [r for m in metrics for r in save_calibration(store, "moe-sweep", m, aa)]
    cal = CalibrateOutcome("moe-sweep", [RunOutcome(r, "moe-sweep", "completed", []) for r in aa], recs, skipped)
    assert [(r.case["M"], r.metric) for r in cal.too_wide] == [(8, "time_ms")]
    assert all(max(r.aa_spread or 0, r.within_spread or 0) <= WIDE_BAND for r in recs if r.case["M"] == 1)
    assert cal.to_dict()["too_wide"] == [{"host": "h1", "case": {"M": 8, "E": 8}, "metric": "time_ms"}]
    render_regress.calibration_table(cal)
    out = " ".join(capsys.readouterr().out.split())
    assert "2 calibrations stored" in out
    skipped_line = "activation_bytes (no samples); distinct_experts (constant)"
    assert f"or constant): {skipped_line}" in out and "not calibrated (no raw samples of their own" in out
    assert "warning: 1 band(s) wider than 50%, too wide to call a change: h1 M=8 time_ms; calibrate on a " \
        "quieter host (no other jobs, fixed clocks) or with more --repeat" in out
