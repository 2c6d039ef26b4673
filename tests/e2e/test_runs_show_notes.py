"""``orch runs show`` on moe-sweep runs (real CLI entry point, real SQLite store): the plateau line and its
footnote, "no plateau within the sweep" for a ramp, and why the percent columns are ``-`` (issue 11 items 3, 4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.cli.render import PLATEAU_NOTE
from orchestrator.protocol import Event
from orchestrator.store.repo import Store
from tests.e2e.conftest import LOCAL_INVENTORY, TINY_CASE, Orch, finished_run, sqlite_db
from tests.e2e.test_untrusted_text import _orch

TINY = TINY_CASE
db = pytest.fixture(sqlite_db, name="db")


def _sweep(store: Store, host: str, facts: dict[str, Any], times: dict[int, float]) -> str:
    return finished_run(store, "moe-sweep", host, [
        Event(seq=i, type="result", data={"case": {"M": m, **TINY}, "metrics": {"time_ms": {"value": t, "unit": "ms"}}})
        for i, (m, t) in enumerate(sorted(times.items()))
    ], facts=facts, preset="tiny")  # fmt: skip


def test_a_cpu_ramp_says_no_plateau_and_why_the_percent_columns_are_empty(db: tuple[str, Store]) -> None:
    url, store = db
    rid = _sweep(store, "cpu-0", {"gpus": []}, {2**i: 0.1 * 2**i for i in range(7)})
    code, text = _orch(url, "runs", "show", rid)
    assert code == 0, text
    text = " ".join(text.split())  # a long table title wraps at the table's width
    assert "cpu-0 — no plateau within the sweep (the time per call never stays flat between two points)" in text
    assert "% of peak is - : the run used no GPU (a CPU device has no datasheet bandwidth in orch's catalog)" in text
    assert (
        "% of roof is - : no hbm-bandwidth run on cpu-0 yet; measure its copy roof with: "
        "orch run hbm-bandwidth --hosts cpu-0" in text
    )
    assert PLATEAU_NOTE in text
    code, text = _orch(url, "runs", "show", rid, "--json")
    [host] = json.loads(text)["hosts"]
    assert (host["plateau_from_m"], host["compute_bound_from_m"]) == (None, None)
    assert host["plateau"]["reason"] == (
        "no plateau within the sweep (the time per call never stays flat between two points)"
    )


def test_notes_wrap_at_words_within_100_columns(db: tuple[str, Store], tmp_path: Path) -> None:
    # the new-user trial: on a 100-column terminal the notes under the tables ran up to 314 characters a line
    url, store = db
    rid = _sweep(store, "cpu-0", {"gpus": []}, {2**i: 0.1 * 2**i for i in range(7)})
    inv = tmp_path / "inventory.yaml"
    inv.write_text(LOCAL_INVENTORY)
    res = Orch(inv, url, tmp_path)("runs", "show", rid, columns=100)
    assert res.returncode == 0, res.stderr
    assert max(len(line) for line in res.stdout.splitlines()) <= 100, res.stdout
    flat = " ".join(res.stdout.split())
    assert "% of roof is - : no hbm-bandwidth run on cpu-0 yet; measure its copy roof with: orch run" in flat


def test_a_flat_sweep_names_its_plateau_and_an_unknown_gpu(db: tuple[str, Store]) -> None:
    url, store = db
    times = {1: 0.9, 2: 1.0, 4: 1.2, 8: 2.0, 16: 2.05, 32: 2.1, 64: 3.5}  # E=16, k=4: all touched from M≈16
    rid = _sweep(store, "gpu-0", {"gpus": [{"name": "NVIDIA Imaginary X1"}]}, times)
    code, text = _orch(url, "runs", "show", rid)
    assert code == 0, text
    assert "gpu-0 — plateau from M=8, compute-bound from M=64" in text
    assert "% of peak is - : orch's GPU catalog (orchestrator/analysis/gpus.py) has no datasheet bandwidth for " \
        "NVIDIA Imaginary X1" in text
    [host] = json.loads(_orch(url, "runs", "show", rid, "--json")[1])["hosts"]
    assert (host["plateau_from_m"], host["compute_bound_from_m"]) == (8, 64)
