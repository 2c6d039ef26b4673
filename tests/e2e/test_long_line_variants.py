"""Variants (issue 10, kinds 1 and 6: long lines) over real sshd and on a ``connection: local`` host, SQLite:
planted spools collected by ``orch run --resume``. Lines up to the 64 MiB cap arrive whole; past it, exactly one
error row naming seq and size; never a split, never an invented seq."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.store.repo import Store
from orchestrator.transport.lines import MAX_LINE_BYTES, STREAM_CHUNK_BYTES
from tests.e2e.conftest import Orch
from tests.e2e.test_ingest_ssh import PLANTED, _collect, _line, _plant, _result, _spool
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


def _sized(seq: int, m: int, size: int) -> str:
    """A result line of exactly ``size`` bytes (newline excluded)."""
    base = len(_result(seq, m, blob=""))
    line = _result(seq, m, blob="z" * (size - base))
    assert len(line) == size
    return line


def _rows(orch: Orch, rid: str) -> list[tuple[int, str, str, int]]:
    s = Store.from_url(orch.db_url)
    try:
        return [(r.seq, r.status, r.error or "", len((r.info or {}).get("blob", ""))) for r in
                s.results(rid, limit=500).items]  # fmt: skip
    finally:
        s.close()


def test_variant_line_exactly_at_the_cap_then_one_past_it(bed: tuple[Orch, SshdHost]) -> None:
    """Variant of kind 1: result line 1 exactly MAX_LINE_BYTES, line 2 MAX_LINE_BYTES+1, line 3 small. Promised:
    line 1 stored whole, line 2 exactly one error row naming seq 2 and its size, line 3 stored, not completed."""
    orch, host = bed
    lines = [_sized(1, 1, MAX_LINE_BYTES), _sized(2, 2, MAX_LINE_BYTES + 1), _result(3, 3)]
    rid = _plant(orch, host, _spool(lines))
    del lines
    doc = _collect(orch, rid, 1)
    h = doc["hosts"][0]
    assert h["status"] == "failed" and (h["results"], h["errors"]) == (2, 1), doc
    rows = _rows(orch, rid)
    assert [(s, st) for s, st, _, _ in rows] == [(1, "ok"), (2, "error"), (3, "ok")], [r[:2] for r in rows]
    assert rows[0][3] == MAX_LINE_BYTES - len(_result(1, 1, blob=""))
    assert f"claiming seq 2) is {MAX_LINE_BYTES + 1:,} bytes" in rows[1][2], rows[1][2]


def test_variant_many_medium_lines_back_to_back(bed: tuple[Orch, SshdHost]) -> None:
    """Variant of kind 1: 120 result lines of 300,001 bytes each (36 MB; each straddles the 256 KiB stream chunk
    at a different offset). Promised: all 120 stored whole, completed."""
    orch, host = bed
    n = 120
    lines = [_sized(i, i, 300_001) for i in range(1, n + 1)]
    rid = _plant(orch, host, _spool(lines))
    doc = _collect(orch, rid, 0)
    assert doc["status"] == "completed" and doc["hosts"][0]["results"] == n, doc
    rows = _rows(orch, rid)
    assert [s for s, *_ in rows] == list(range(1, n + 1))
    assert {st for _, st, _, _ in rows} == {"ok"}

    for seq, _, _, b in rows:
        assert b == 300_001 - len(_result(seq, seq, blob="")), seq


def test_variant_multibyte_utf8_split_across_chunk_boundaries(bed: tuple[Orch, SshdHost]) -> None:
    """Variant of kind 1: result lines with raw (not \\u-escaped) 2-, 3- and 4-byte UTF-8 characters, sized so
    that characters straddle every STREAM_CHUNK_BYTES boundary. Promised: stored exactly, completed."""
    orch, host = bed
    texts = []
    lines = []
    for i, ch in enumerate(["é", "€", "𝄞", "é€𝄞"], start=1):
        count = (STREAM_CHUNK_BYTES * 3) // len(ch.encode()) + i
        blob = ch * count
        texts.append(blob)
        doc = json.loads(_result(i, i))
        doc["info"] = {"blob": blob}
        lines.append(json.dumps(doc, ensure_ascii=False))
    rid = _plant(orch, host, _spool(lines))
    doc = _collect(orch, rid, 0)
    assert doc["status"] == "completed" and doc["hosts"][0]["results"] == 4, doc
    s = Store.from_url(orch.db_url)
    try:
        got = [r.info["blob"] for r in s.results(rid, limit=10).items]
    finally:
        s.close()
    assert got == texts


def test_variant_long_last_line_without_newline_and_no_done(bed: tuple[Orch, SshdHost]) -> None:
    """Variant of kind 1: the spool ends with a 20 MB result line without its trailing newline, no done line
    (the agent died while writing it). Promised: never completed, results 1-2 stored, the unfinished line either
    stored whole or not at all (never a piece of it, never an invented seq)."""
    orch, host = bed
    body = _spool([_result(1, 1), _result(2, 2)])[:-1]
    rid = _plant(orch, host, body)
    spool = host.home / ".orch" / "runs" / rid / host.name / "events.jsonl"
    with spool.open("a") as f:
        f.write(_sized(3, 3, 20_000_000))  # no newline
    doc = _collect(orch, rid, 1)
    h = doc["hosts"][0]
    assert doc["status"] != "completed" and h["status"] == "failed", doc
    rows = _rows(orch, rid)
    assert [s for s, st, _, _ in rows if st == "ok"][:2] == [1, 2], [r[:3] for r in rows]
    assert all(s <= 3 for s, *_ in rows), [r[:3] for r in rows]
    ok3 = [r for r in rows if r[0] == 3 and r[1] == "ok"]
    assert not ok3 or ok3[0][3] == 20_000_000 - len(_result(3, 3, blob=""))


def test_variant_done_line_without_trailing_newline_after_a_long_line(bed: tuple[Orch, SshdHost]) -> None:
    """Variant of kind 1: a 30 MB result, then the done line without its trailing newline. Promised: loud —
    either completed with every line stored, or the host failed; never completed with a line missing, and the
    command ends (no hang)."""
    orch, host = bed
    spool = _spool([_result(1, 1), _sized(2, 2, 30_000_000)])
    rid = _plant(orch, host, spool[:-1])
    path = host.home / ".orch" / "runs" / rid / host.name / "events.jsonl"
    with path.open("a") as f:
        f.write(spool[-1])
    res = orch("run", "--resume", rid, "--json", timeout=300)
    doc = json.loads(res.stdout)
    h = doc["hosts"][0]
    rows = _rows(orch, rid)
    if doc["status"] == "completed":
        assert res.returncode == 0 and [(s, st) for s, st, _, _ in rows] == [(1, "ok"), (2, "ok")], rows
    else:
        assert res.returncode == 1 and h["status"] == "failed" and h["error"], doc


# -- connection: local --------------------------------------------------------------------------------------


def _local(tmp_path: Path) -> tuple[Orch, Path]:
    home = tmp_path / "orchhome"
    inv = tmp_path / "inventory.yaml"
    inv.write_text(f"groups:\n  local:\n    hosts:\n      localhost: {{connection: local, orch_home: {home}}}\n")
    o = Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    res = o("db", "upgrade")
    assert res.returncode == 0, res.stderr
    return o, home


def _plant_local(orch: Orch, home: Path, lines: list[str]) -> str:
    s = Store.from_url(orch.db_url)
    try:
        s.upsert_host("localhost", address=None, group="local", labels={})
        rid = s.create_run(suite="noop", params={"sets": {}}, preset=None, label="planted", hosts=["localhost"],
                           started_by="t@box", started_on="box")  # fmt: skip
        s.start_host_run(rid, "localhost", facts={}, agent_version="planted", build_sha=None)
    finally:
        s.close()
    d = home / "runs" / rid / "localhost"
    d.mkdir(parents=True)
    with open(d / "events.jsonl", "w") as f:
        for line in lines:
            f.write(line.replace(f'"run_id": "{PLANTED}"', json.dumps({"run_id": rid})[1:-1]) + "\n")
    return rid


def test_variant_local_host_long_lines_whole_and_past_cap_one_error(tmp_path: Path) -> None:
    """Variant of kinds 1/6 on a ``connection: local`` host: a 40 MB line (past asyncio's 64 KiB readline limit
    by far), a line one byte past the cap, and a 1 MB line. Promised: 40 MB and 1 MB stored whole, one error row
    for seq 2 naming its size, not completed."""
    orch, home = _local(tmp_path)
    rid = _plant_local(orch, home, _spool([_sized(1, 1, 40_000_000), _sized(2, 2, MAX_LINE_BYTES + 1),
                                           _sized(3, 3, 1_000_000)]))  # fmt: skip
    doc = _collect(orch, rid, 1)
    h = doc["hosts"][0]
    assert h["status"] == "failed" and (h["results"], h["errors"]) == (2, 1), doc
    rows = _rows(orch, rid)
    assert [(s, st) for s, st, _, _ in rows] == [(1, "ok"), (2, "error"), (3, "ok")]
    assert rows[0][3] == 40_000_000 - len(_result(1, 1, blob=""))
    assert f"claiming seq 2) is {MAX_LINE_BYTES + 1:,} bytes" in rows[1][2], rows[1][2]


def test_variant_local_host_line_exactly_at_cap_is_whole(tmp_path: Path) -> None:
    """Variant of kind 6: a ``connection: local`` host's spool holding a line of exactly MAX_LINE_BYTES.
    Promised: stored whole, completed."""
    orch, home = _local(tmp_path)
    rid = _plant_local(orch, home, _spool([_result(1, 1), _sized(2, 2, MAX_LINE_BYTES)]))
    doc = _collect(orch, rid, 0)
    assert doc["status"] == "completed" and doc["hosts"][0]["results"] == 2, doc
    rows = _rows(orch, rid)
    assert rows[1][3] == MAX_LINE_BYTES - len(_result(2, 2, blob=""))


_ = _line
