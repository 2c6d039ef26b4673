"""Variants (issue 10, kinds 1/2): more spool shapes over real sshd (planted spools, ``orch run --resume``) and
through ``orch runs import``, SQLite. Values Python's ``==`` takes for integers (``true`` == 1, ``3.0`` == 3) in
fields other than seq (case_index, the done counts, cases_total); an empty line and invalid UTF-8 inside the
spool; CRLF endings; a done line without its newline and lines around the cap through import. Promised: every
disagreement is loud (an error row or a failed host naming it), never ``completed`` with a line not stored as the
agent wrote it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.store.repo import Store
from orchestrator.transport.lines import MAX_LINE_BYTES
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


def _spool_path(host: SshdHost, rid: str) -> Path:
    return host.home / ".orch" / "runs" / rid / host.name / "events.jsonl"


MUTATIONS = {
    # (index of the spool line to change, old text, new text)
    "case_index-true": (2, '"case_index": 1,', '"case_index": true,'),
    "case_index-1.0": (2, '"case_index": 1,', '"case_index": 1.0,'),
    "case_index-string": (2, '"case_index": 1,', '"case_index": "1",'),
    "done-results-float": (-1, '"results": 3,', '"results": 3.0,'),
    "done-errors-false": (-1, '"errors": 0', '"errors": false'),
    "done-lines-string": (-1, '"lines": 4,', '"lines": "4",'),
    "hello-cases_total-float": (0, '"cases_total": 3', '"cases_total": 3.0'),
    "hello-cases_total-true-of-1": (0, '"cases_total": 1', '"cases_total": true'),
}


@pytest.mark.parametrize("shape", MUTATIONS)
def test_variant_integer_fields_of_another_json_type_are_loud(bed: tuple[Orch, SshdHost], shape: str) -> None:
    """Variant of kind 2 beyond seq: an integer field (case_index, a done count, cases_total) written as a bool,
    float or string — a type the agent never writes; Python's ``True == 1`` and ``3.0 == 3`` would pass an
    equality check. Promised: loud — an error row or a failed host — never a completed run."""
    orch, host = bed
    spool = _spool([_result(1, 1), _result(2, 2), _result(3, 3)])
    if shape.endswith("-of-1"):  # one case: true == 1 would agree with the one result
        spool = _spool([_result(1, 1)])
    at, old, new = MUTATIONS[shape]
    assert old in spool[at], (shape, spool[at])
    spool[at] = spool[at].replace(old, new)
    rid = _plant(orch, host, spool)
    res = orch("run", "--resume", rid, "--json", timeout=300)
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    h = doc["hosts"][0]
    assert doc["status"] != "completed" and h["status"] == "failed" and res.returncode == 1, (shape, doc)


def test_variant_an_empty_line_inside_the_spool_is_loud(bed: tuple[Orch, SshdHost]) -> None:
    """Variant of kind 2: an empty line between results 1 and 2 (every later line is now one position past its
    seq). Promised: loud (error rows / a failed host), never completed."""
    orch, host = bed
    spool = _spool([_result(1, 1), _result(2, 2), _result(3, 3)])
    rid = _plant(orch, host, [*spool[:2], "", *spool[2:]])
    res = orch("run", "--resume", rid, "--json", timeout=300)
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert doc["status"] != "completed" and doc["hosts"][0]["status"] == "failed", doc


def test_variant_invalid_utf8_inside_a_long_line_is_one_error_row(bed: tuple[Orch, SshdHost]) -> None:
    """Variant of kind 1: a 1 MB result line with a lone 0xff byte in the middle of its blob. Promised: one error
    row at seq 2 (the line cannot be the agent's), the others stored, not completed."""
    orch, host = bed
    spool = _spool([_result(1, 1), _result(2, 2, blob="a" * 1_000_000), _result(3, 3)])
    rid = _plant(orch, host, spool)
    path = _spool_path(host, rid)
    raw = path.read_bytes()
    at = raw.index(b"a" * 1000) + 500_000
    path.write_bytes(raw[:at] + b"\xff" + raw[at + 1 :])
    res = orch("run", "--resume", rid, "--json", timeout=300)
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    h = doc["hosts"][0]
    assert doc["status"] != "completed" and h["status"] == "failed", doc
    rows = _rows(orch, rid)
    assert [(s, st) for s, st, _ in rows] == [(1, "ok"), (2, "error"), (3, "ok")], rows


def test_variant_crlf_line_endings_are_loud_or_whole(bed: tuple[Orch, SshdHost]) -> None:
    """Variant of kind 1: every spool line ends in CRLF (copied through a Windows tool). Promised: either every
    line stored as written (completed) or loud; never a completed run missing a line."""
    orch, host = bed
    spool = _spool([_result(1, 1), _result(2, 2)])
    rid = _plant(orch, host, [x + "\r" for x in spool])
    res = orch("run", "--resume", rid, "--json", timeout=300)
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    if doc["status"] == "completed":
        assert [(s, st) for s, st, _ in _rows(orch, rid)] == [(1, "ok"), (2, "ok")]
    else:
        assert doc["hosts"][0]["status"] == "failed" and doc["hosts"][0]["error"], doc


# -- through orch runs import -------------------------------------------------------------------------------


def _import(orch: Orch, path: Path) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    res = orch("runs", "import", str(path), "--host", "gpu-a", "--json", timeout=300)
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    return res.returncode, (json.loads(res.stdout) if res.stdout.strip() else {}), res.stderr


def test_variant_import_of_a_spool_with_a_line_past_the_cap(bed: tuple[Orch, SshdHost]) -> None:
    """Variant of kind 1 through ``orch runs import``: a line exactly at the cap, then one a byte past it.
    Promised: the first stored whole, exactly one error row naming seq 2 and its size, not completed."""
    orch, host = bed
    base = len(_result(1, 1, blob=""))
    at_cap = _result(1, 1, blob="q" * (MAX_LINE_BYTES - base))
    over = _result(2, 2, blob="q" * (MAX_LINE_BYTES + 1 - base))
    rid = _plant(orch, host, _spool([at_cap, over, _result(3, 3)]))
    del at_cap, over
    rc, out, err = _import(orch, _spool_path(host, rid))
    assert rc == 1, (rc, out, err[-2000:])
    rows = _rows(orch, rid)
    assert [(s, st) for s, st, _ in rows] == [(1, "ok"), (2, "error"), (3, "ok")], [r[:2] for r in rows]
    assert f"is {MAX_LINE_BYTES + 1:,} bytes" in rows[1][2], rows[1][2]
    s = Store.from_url(orch.db_url)
    try:
        assert s.get_run(rid).status != "completed"
    finally:
        s.close()


def test_variant_import_of_a_spool_whose_done_line_lacks_its_newline(bed: tuple[Orch, SshdHost]) -> None:
    """Variant of kind 1 through ``orch runs import``: the done line is the last and has no trailing newline.
    Promised: loud if it is not taken (the run is not completed and the output says the last line is unfinished);
    if it is taken, completed with every line stored."""
    orch, host = bed
    spool = _spool([_result(1, 1), _result(2, 2)])
    rid = _plant(orch, host, spool)
    path = _spool_path(host, rid)
    path.write_bytes(path.read_bytes().rstrip(b"\n"))
    rc, out, err = _import(orch, path)
    s = Store.from_url(orch.db_url)
    try:
        status = s.get_run(rid).status
    finally:
        s.close()
    if status == "completed":
        assert rc == 0 and [(q, st) for q, st, _ in _rows(orch, rid)] == [(1, "ok"), (2, "ok")]
    else:
        assert rc != 0 and (out.get("error") or err), (rc, out, err)


_ = _collect, _line


IMPORT_SEQ = {"seq-true": '"seq": true,', "seq-3.0": '"seq": 3.0,', "seq-string": '"seq": "3",',
              "seq-null": '"seq": null,'}


@pytest.mark.parametrize("shape", IMPORT_SEQ)
def test_variant_import_of_a_spool_with_a_non_integer_seq(bed: tuple[Orch, SshdHost], shape: str) -> None:
    """Variant of kind 2 through ``orch runs import``: the line at position 3 claims seq as true, 3.0, "3" or null
    (true only makes sense at position 1: it is put there). Promised: one error row, not completed, exit non-zero,
    and the import's own counts equal the store's."""
    orch, host = bed
    results = [_result(i, i) for i in range(1, 6)]
    pos = 1 if shape == "seq-true" else 3
    results[pos - 1] = results[pos - 1].replace(f'"seq": {pos},', IMPORT_SEQ[shape])
    rid = _plant(orch, host, _spool(results))
    rc, out, err = _import(orch, _spool_path(host, rid))
    assert rc != 0, (rc, out, err[-2000:])
    rows = _rows(orch, rid)
    assert [st for _, st, _ in rows].count("error") == 1 and len(rows) == 5, rows
    s = Store.from_url(orch.db_url)
    try:
        d = s.get_run(rid)
        assert d.status != "completed" and (d.results, d.errors) == (4, 1), (d.status, d.results, d.errors)
    finally:
        s.close()
