"""Variants (issue 10, kind 2: seq trust) over real sshd, SQLite only: planted spools collected by
``orch run --resume`` (the helpers of test_ingest_ssh). A seq that is not the line's integer position is one error
row and the run is not ``completed``; lines after ``done`` are never stored and the host fails saying so; the
counts the CLI shows equal the store's."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.store.repo import Store
from tests.e2e.conftest import Orch
from tests.e2e.test_ingest_ssh import _collect, _line, _plant, _result, _spool
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


def _store_counts(orch: Orch, rid: str) -> tuple[int, int, str]:
    s = Store.from_url(orch.db_url)
    try:
        d = s.get_run(rid)
        return d.results, d.errors, d.status
    finally:
        s.close()


# the raw JSON text replacing `"seq": 3,` on the line at position 3 (a result)
BAD_SEQ = {
    "string-3": '"3"',
    "string-5": '"5"',
    "zero": "0",
    "negative": "-3",
    "float-3.0": "3.0",
    "float-5.0": "5.0",
    "bool-true": "true",
    "null": "null",
    "huge-int": "1" + "0" * 40,
    "exp-3e0": "3e0",
}


@pytest.mark.parametrize("shape", BAD_SEQ)
def test_variant_non_integer_or_wrong_seq_at_position_3_is_one_error_row(
    bed: tuple[Orch, SshdHost], shape: str
) -> None:
    """Variant of kind 2: the line at position 3 claims seq as a string, 0, negative, a float (even 3.0, which is
    numerically its position but not an integer), a bool, null, a 41-digit int or 3e0. Promised: one error row
    at that position, the host failed, the run not completed, CLI counts equal the store's."""
    orch, host = bed
    results = [_result(i, i) for i in range(1, 7)]
    assert '"seq": 3,' in results[2]
    results[2] = results[2].replace('"seq": 3,', f'"seq": {BAD_SEQ[shape]},')
    rid = _plant(orch, host, _spool(results))
    doc = _collect(orch, rid, 1)
    h = doc["hosts"][0]
    assert doc["status"] != "completed" and h["status"] == "failed", (shape, doc)
    assert (h["results"], h["errors"]) == (5, 1), (shape, doc)
    rows = _rows(orch, rid)
    assert [(s, st) for s, st, _ in rows] == [(1, "ok"), (2, "ok"), (3, "error"), (4, "ok"), (5, "ok"), (6, "ok")]
    assert "agent line 3" in rows[2][2], rows[2]
    res, err, status = _store_counts(orch, rid)
    assert (res, err) == (h["results"], h["errors"]) and status == doc["status"]


def test_variant_seq_true_at_position_1_is_an_error_row(bed: tuple[Orch, SshdHost]) -> None:
    """Variant of kind 2: JSON ``true`` as the seq of line 1 (Python's True == 1, so a check by equality passes
    it). Promised: a non-integer seq is one error row and the run is not completed."""
    orch, host = bed
    results = [_result(i, i) for i in range(1, 4)]
    results[0] = results[0].replace('"seq": 1,', '"seq": true,')
    rid = _plant(orch, host, _spool(results))
    doc = _collect(orch, rid, 1)
    h = doc["hosts"][0]
    assert doc["status"] != "completed" and h["status"] == "failed", doc
    assert (h["results"], h["errors"]) == (2, 1), doc


def test_variant_seq_1_0_float_at_position_1_is_an_error_row(bed: tuple[Orch, SshdHost]) -> None:
    """Variant of kind 2: seq 1.0 at position 1 (float equal to the position)."""
    orch, host = bed
    results = [_result(i, i) for i in range(1, 4)]
    results[0] = results[0].replace('"seq": 1,', '"seq": 1.0,')
    rid = _plant(orch, host, _spool(results))
    doc = _collect(orch, rid, 1)
    h = doc["hosts"][0]
    assert doc["status"] != "completed" and h["status"] == "failed", doc
    assert (h["results"], h["errors"]) == (2, 1), doc


def _done(seq: int, n: int) -> str:
    return _line(seq, "done", status="completed", counts={"lines": seq, "results": n, "errors": 0})


@pytest.mark.parametrize(
    "tail",
    ["dup-done-same-seq", "two-done-next-seq", "result-after-done", "done-after-done-then-result"],
)
def test_variant_lines_after_done_are_not_stored_and_the_host_fails(bed: tuple[Orch, SshdHost], tail: str) -> None:
    """Variant of kind 2: the spool's done line is followed by a duplicate of itself (same seq), by a second done
    (next seq), by a result (next seq), or by a done and a result. Promised: lines after done are never stored, the
    host is failed saying so, the run is not completed, counts in the CLI equal the store's."""
    orch, host = bed
    spool = _spool([_result(1, 1), _result(2, 2), _result(3, 3)])
    done_at = 4
    extra = {
        "dup-done-same-seq": [spool[-1]],
        "two-done-next-seq": [_done(5, 3)],
        "result-after-done": [_result(5, 4)],
        "done-after-done-then-result": [_done(5, 3), _result(6, 4)],
    }[tail]
    rid = _plant(orch, host, [*spool, *extra])
    doc = _collect(orch, rid, 1)
    h = doc["hosts"][0]
    assert h["status"] == "failed" and doc["status"] != "completed", (tail, doc)
    assert f"after the done line (line {done_at}) were not stored" in (h["error"] or ""), (tail, h)
    assert (h["results"], h["errors"]) == (3, 0), (tail, doc)
    rows = _rows(orch, rid)
    assert [s for s, _, _ in rows] == [1, 2, 3], rows
    res, err, status = _store_counts(orch, rid)
    assert (res, err) == (h["results"], h["errors"]) and status == doc["status"]
    show = orch.json("runs", "show", rid, expect_rc=None)
    hs = next(x for x in show["hosts"] if x["host"] == host.name)
    assert (hs["results"], hs["errors"]) == (res, err)


def test_variant_seq_gap_on_the_done_line_itself(bed: tuple[Orch, SshdHost]) -> None:
    """Variant of kind 2: every result is right but the done line claims seq 9 at position 4. Promised: an
    error row (or failed host naming it), never a completed run."""
    orch, host = bed
    spool = _spool([_result(1, 1), _result(2, 2), _result(3, 3)])
    spool[-1] = spool[-1].replace('"seq": 4,', '"seq": 9,')
    rid = _plant(orch, host, spool)
    doc = _collect(orch, rid, 1)
    h = doc["hosts"][0]
    assert doc["status"] != "completed" and h["status"] == "failed", doc


def test_variant_hello_with_seq_1(bed: tuple[Orch, SshdHost]) -> None:
    """Variant of kind 2: the hello claims seq 1 at position 0. Promised: one error row, run not completed."""
    orch, host = bed
    spool = _spool([_result(1, 1), _result(2, 2)])
    spool[0] = spool[0].replace('"seq": 0,', '"seq": 1,')
    rid = _plant(orch, host, spool)
    doc = _collect(orch, rid, 1)
    h = doc["hosts"][0]
    assert doc["status"] != "completed" and h["status"] == "failed", doc
