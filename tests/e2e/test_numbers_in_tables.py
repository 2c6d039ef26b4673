"""Numbers in the CLI's tables (the real entry point over a real SQLite store): a CPU moe-sweep's TFLOP/s of
0.00475 printed ``0.00`` in ``orch runs show`` while its JSON held the value. Every cell keeps at least 3 significant
figures and never turns a non-zero value into 0 — in ``runs show`` (moe-sweep and any other suite) and in
``runs compare``."""

from __future__ import annotations

import pytest

from orchestrator.numfmt import number
from orchestrator.protocol import Event
from orchestrator.runner import enrich_event
from orchestrator.store.repo import Store
from tests.e2e.conftest import finished_run, sqlite_db
from tests.e2e.test_untrusted_text import _orch

TINY = {"E": 16, "k": 4, "shared": 1, "H": 256, "I": 128, "dtype": "fp32"}


db = pytest.fixture(sqlite_db, name="db")


def _run(store: Store, suite: str, events: list[Event]) -> str:
    return finished_run(store, suite, "cpu-0", events)


def _rows(text: str) -> dict[str, list[str]]:
    """Table rows (and the header row) by their first cell."""
    out = {}
    for line in text.splitlines():
        line = line.replace("┃", "│")
        if line.count("│") >= 3:
            cells = [c.strip() for c in line.split("│")[1:-1]]
            out[cells[0]] = cells
    return out


def test_moe_sweep_tflops_below_a_hundredth_keep_their_figures(db: tuple[str, Store]) -> None:
    url, store = db
    times = {1: 0.207, 8: 4.0, 64: 12.0}  # CPU speed: TFLOP/s from 0.0007 to 0.03
    rid = _run(store, "moe-sweep", [
        enrich_event("moe-sweep", Event(seq=i, type="result", data={
            "case": {"M": m, **TINY}, "metrics": {"time_ms": {"value": t, "unit": "ms"}}}), None)
        for i, (m, t) in enumerate(sorted(times.items()))
    ])  # fmt: skip
    tflops = {r.m: r.metrics["tflops"]["value"] for r in store.results(rid).items}
    assert any(0.001 < v < 0.01 for v in tflops.values())  # the premise: a value a 2-decimal cell shows as 0.00
    code, text = _orch(url, "runs", "show", rid)
    assert code == 0, text
    rows = _rows(text)
    header = rows["M"]
    col = header.index("TFLOP/s")
    for m, value in tflops.items():
        cell = rows[str(m)][col]
        assert cell == number(value) and float(cell) != 0, (m, value, cell)
        assert abs(float(cell) - value) <= 0.005 * value
    assert rows["1"][col] == "0.00475"  # 2·5·3·256·128 FLOP / 0.207 ms


def test_any_suite_edges_in_runs_show_and_compare(db: tuple[str, Store]) -> None:
    url, store = db
    values = {"tiny": 1e-7, "small": 0.00194, "big": 12345.6, "neg": -0.0031, "zero": 0.0}

    def events(scale: float) -> list[Event]:
        return [
            Event(seq=i, type="result", data={"case": {"what": name}, "metrics": {"v": {
                "value": v * scale, "unit": "u", "median": v * scale,
                "p10": v * scale * 0.99, "p90": v * scale * 1.01}}})
            for i, (name, v) in enumerate(values.items())
        ]  # fmt: skip

    base = _run(store, "my-suite", events(1.0))
    head = _run(store, "my-suite", events(1.0004))
    code, text = _orch(url, "runs", "show", base)
    assert code == 0, text
    rows = _rows(text)
    shown = {name: rows[f"what={name}"][1] for name in values}
    assert shown == {"tiny": "1.00e-07 (9.90e-08–1.01e-07) u", "small": "0.00194 (0.00192–0.00196) u",
                     "big": "12,346 (12,222–12,469) u", "neg": "-0.00310 (-0.00307–-0.00313) u",
                     "zero": "0 (0–0) u"}  # fmt: skip
    code, text = _orch(url, "runs", "compare", base, head, "--metric", "v")
    assert code == 0, text
    for line in text.splitlines():
        if "what=small" in line:
            cells = [c.strip() for c in line.split("│")[1:-1]]
            assert cells[2:5] == ["0.00194 (0.00192–0.00196)", "0.00194 (0.00192–0.00196)", "1.000"], cells
            break
    else:
        raise AssertionError(text)


def test_compare_prints_the_shared_case_parameters_once(db: tuple[str, Store]) -> None:
    """``runs compare`` repeated E=16 H=256 ... on every row (6 lines per row in 100 columns): the parameters
    every case shares are printed once above the table, and a row shows only what varies."""
    url, store = db

    def events(scale: float) -> list[Event]:
        return [
            Event(seq=i, type="result", data={"case": {"M": m, **TINY, "seed": 0}, "metrics": {"time_ms": {
                "value": scale * m, "unit": "ms", "median": scale * m, "p10": scale * m, "p90": scale * m}}})
            for i, m in enumerate((1, 8, 64))
        ]  # fmt: skip

    base, head = _run(store, "moe-sweep", events(1.0)), _run(store, "moe-sweep", events(1.01))
    code, text = _orch(url, "runs", "compare", base, head)
    assert code == 0, text
    assert "every case: E=16 k=4 shared=1 H=256 I=128 dtype=fp32" in text
    rows = _rows(text)
    assert [rows[h][1] for h in rows if h == "cpu-0"] == ["M=64"]  # the last row per host key
    cases = [ln.split("│")[2].strip() for ln in text.splitlines() if ln.count("│") >= 4 and "cpu-0" in ln]
    assert cases == ["M=1", "M=8", "M=64"], text
