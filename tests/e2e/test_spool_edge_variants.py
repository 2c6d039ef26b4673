"""Variants (issue 10, kinds 1 and 4), more: the hello line or the done line past the 64 MiB cap, and
``orch run --resume`` of a cancelled run, over real sshd, SQLite."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from orchestrator.store.repo import Store
from orchestrator.transport.lines import MAX_LINE_BYTES
from tests.e2e.conftest import Orch
from tests.e2e.killed_run import wait_first_result
from tests.e2e.test_ingest_ssh import _line, _plant, _result, _spool
from tests.e2e.test_resume_spool_check import SLOW_SUITE
from tests.plugins.sshd import SshdBed, SshdHost

pytestmark = [pytest.mark.sshd]


@pytest.fixture
def bed(sshd_bed: SshdBed, tmp_path: Path) -> tuple[Orch, SshdHost]:
    a = sshd_bed.add("gpu-a")
    inv = tmp_path / "inventory.yaml"
    inv.write_text(sshd_bed.inventory_yaml({"ct200": [a]}))
    url = f"sqlite:///{tmp_path / 'orch.db'}"
    s = Store.from_url(url)
    s.upgrade()
    s.close()
    return Orch(inv, url, tmp_path), a


def _rows(orch: Orch, rid: str) -> list[tuple[int, str, str]]:
    s = Store.from_url(orch.db_url)
    try:
        return [(r.seq, r.status, r.error or "") for r in s.results(rid, limit=50).items]
    finally:
        s.close()


def _pad(line: str, size: int) -> str:
    doc = json.loads(line)
    doc["pad"] = ""
    base = len(json.dumps(doc))
    doc["pad"] = "p" * (size - base)
    out = json.dumps(doc)
    assert len(out) == size
    return out


@pytest.mark.parametrize("which", ["hello", "done"])
def test_variant_hello_or_done_line_past_the_cap(bed: tuple[Orch, SshdHost], which: str) -> None:
    """Variant of kind 1: the hello (seq 0) or the done line is one byte past the cap. Promised: exactly one error
    row naming that seq and the size, results kept, the host failed, never completed; no invented seq."""
    orch, host = bed
    spool = _spool([_result(1, 1), _result(2, 2)])
    at = 0 if which == "hello" else len(spool) - 1
    spool[at] = _pad(spool[at], MAX_LINE_BYTES + 1)
    rid = _plant(orch, host, spool)
    del spool
    raw = (host.home / ".orch" / "runs" / rid / host.name / "events.jsonl").read_bytes()
    size = len(raw.split(b"\n")[at])  # _plant writes the run's real id into the hello: longer than PLANTED
    del raw
    assert size > MAX_LINE_BYTES
    res = orch("run", "--resume", rid, "--json", timeout=300)
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    h = doc["hosts"][0]
    assert res.returncode == 1 and doc["status"] != "completed" and h["status"] == "failed", doc
    rows = _rows(orch, rid)
    errs = [r for r in rows if r[1] == "error"]
    assert len(errs) == 1 and errs[0][0] == at, rows
    assert f"is {size:,} bytes" in errs[0][2], errs
    assert [s for s, st, _ in rows if st == "ok"] == [1, 2], rows
    assert all(0 <= s <= 3 for s, _, _ in rows), rows


def test_variant_resume_of_a_cancelled_run_stays_cancelled(bed: tuple[Orch, SshdHost], tmp_path: Path) -> None:
    """Variant of kind 4: a run cancelled after its first result; ``--resume`` (twice). Promised (README): it
    collects what the stopped agent wrote after orch stopped reading, starts nothing, and the run stays
    cancelled; the second resume changes nothing; no case is stored twice."""
    orch, _host = bed
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "slow.yaml").write_text(SLOW_SUITE)
    proc = orch.popen("run", "slow", "--hosts", "gpu-a", "--suite-dir", str(suites), "--json")
    store = Store.from_url(orch.db_url)
    try:
        rid = wait_first_result(store, proc)
        c = orch("cancel", rid, "--json")
        assert c.returncode == 0, c.stderr
        proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    before = _rows(orch, rid)
    assert store.get_run(rid).status == "cancelled"
    outs: list[Any] = []
    for _ in range(2):
        r = orch("run", "--resume", rid, "--suite-dir", str(suites), "--json", timeout=300)
        assert "Traceback" not in r.stderr, r.stderr[-2000:]
        outs.append((r.returncode, r.stdout[-800:], r.stderr[-800:]))
        assert store.get_run(rid).status == "cancelled", outs
    after = _rows(orch, rid)
    assert len(after) == len({s for s, _, _ in after}) and set(before) <= set(after), (before, after)
    store.close()


_ = _line
