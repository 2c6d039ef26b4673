"""``orch runs show`` (real CLI entry point, real SQLite store) marks a measurement whose p10–p90 spread is wider
than 20% of its median as noisy, in its cell and in a note naming the cases (docs/metrics.md, Noisy
measurements)."""

from __future__ import annotations

import json

import pytest

from orchestrator.cli.render import NOISY_NOTE
from orchestrator.protocol import Event
from orchestrator.store.repo import Store
from tests.e2e.conftest import TINY_CASE, finished_run, sqlite_db
from tests.e2e.test_untrusted_text import _orch

TINY = TINY_CASE
db = pytest.fixture(sqlite_db, name="db")


def _sweep(store: Store, host: str, suite: str, figures: dict[int, tuple[float, float, float]]) -> str:
    return finished_run(store, suite, host, [
        Event(seq=i, type="result", data={"case": {"M": m, **TINY}, "metrics": {"time_ms": {
            "value": med, "unit": "ms", "median": med, "p10": p10, "p90": p90, "n": 5}}})
        for i, (m, (med, p10, p90)) in enumerate(sorted(figures.items()))
    ], facts={"gpus": []}, preset="tiny")  # fmt: skip


@pytest.mark.parametrize("suite", ["moe-sweep", "my-suite"])
def test_a_wide_spread_is_marked_noisy_and_named(db: tuple[str, Store], suite: str) -> None:
    url, store = db
    # the finding: 0.44 (0.40–155) ms shown with no warning; M=2's 10% spread and M=4's 20% exactly are not noisy
    rid = _sweep(store, "cpu-0", suite, {1: (0.44, 0.40, 155.0), 2: (1.0, 0.95, 1.05), 4: (4.0, 3.5, 4.3)})
    code, text = _orch(url, "runs", "show", rid)
    assert code == 0, text
    rows = {line.split("│")[1].strip(): line for line in text.splitlines() if line.count("│") >= 4}
    m1 = next(v for k, v in rows.items() if k in ("1", "M=1"))
    assert "0.440 (0.400–155) noisy" in m1 or "0.440 (0.400–155) ms noisy" in m1, m1
    assert all("noisy" not in v for k, v in rows.items() if k not in ("1", "M=1"))
    flat = " ".join(text.split())
    assert f"noisy: cpu-0: M=1 time_ms 35136% — {NOISY_NOTE}" in flat
    assert flat.count("noisy:") == 1
    code, text = _orch(url, "runs", "show", rid, "--json")
    assert code == 0 and json.loads(text)  # --json is unchanged: figures only


def test_the_note_names_every_metric_the_table_marks(db: tuple[str, Store]) -> None:
    """The finding (docs/suites.md's sha256-speed): the table marked time_ms and gbps noisy, the note named only
    wall_ms. Every marked cell's metric is named, per case; an unmarked one is not."""
    url, store = db
    store.upsert_host("cpu-0", address=None, group="g", labels={})
    rid = store.create_run(suite="sha256-speed", params={}, preset="quick", label=None, hosts=["cpu-0"],
                           started_by="t@box", started_on="box")  # fmt: skip
    store.start_host_run(rid, "cpu-0", facts={"gpus": []}, agent_version="v", build_sha=None)

    def m(med: float, p10: float, p90: float, unit: str) -> dict[str, object]:
        return {"value": med, "unit": unit, "median": med, "p10": p10, "p90": p90, "n": 5}

    store.ingest(rid, "cpu-0", [
        Event(seq=0, type="result", data={"case": {"size_mb": 1}, "metrics": {
            "wall_ms": m(10.0, 9.0, 14.0, "ms"), "time_ms": m(4.0, 3.0, 5.0, "ms"),
            "gbps": m(0.25, 0.2, 0.33, "GB/s"), "steady": m(1.0, 0.99, 1.01, "x")}}),
        Event(seq=1, type="result", data={"case": {"size_mb": 8}, "metrics": {
            "wall_ms": m(10.0, 9.9, 10.1, "ms"), "time_ms": m(4.0, 3.99, 4.01, "ms"),
            "gbps": m(2.0, 1.0, 3.0, "GB/s"), "steady": m(1.0, 0.99, 1.01, "x")}}),
    ])  # fmt: skip
    store.finish_host_run(rid, "cpu-0", "completed")
    store.finish_run(rid, "completed")
    code, text = _orch(url, "runs", "show", rid)
    assert code == 0, text
    marked = {}
    for line in text.splitlines():
        if line.count("│") >= 4 and "size_mb=" in line:
            cells = [c.strip() for c in line.split("│")[1:-1]]
            marked[cells[0]] = [i for i, c in enumerate(cells) if c.endswith("noisy")]
    header = next([c.strip() for c in ln.split("┃")[1:-1]] for ln in text.splitlines() if "┃ case" in ln)
    named = {case: [header[i] for i in cols] for case, cols in marked.items()}
    assert named == {"size_mb=1": ["wall_ms", "time_ms", "gbps"], "size_mb=8": ["gbps"]}
    flat = " ".join(text.split())
    assert f"noisy: cpu-0: size_mb=1 wall_ms 50%, time_ms 50%, gbps 52%; size_mb=8 gbps 100% — {NOISY_NOTE}" in flat
