"""Concurrent ``orch runs import`` of one spool (8 processes on a new SQLite file, 4 on PostgreSQL): each says
how many lines *its* transactions stored, so the "newly stored" counts add up to the spool's lines and the
store holds every line once (issue 10: each printed "8 lines, 8 newly stored")."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.store.repo import Store
from tests.integration.test_spool_import_checks import RUN_ID
from tests.integration.test_spool_import_hosts import _orch, _spool_at, suite_dir

__all__ = ["suite_dir"]  # the fixture, used by name


def test_newly_stored_counts_of_concurrent_imports_add_up_to_the_lines(
    tmp_path: Path, db_url: str, suite_dir: Path
) -> None:
    if db_url.startswith("sqlite"):
        db_url, n = f"sqlite:///{tmp_path / 'new.db'}", 8  # a new file: the first start migrates it, concurrently
    else:
        s = Store.from_url(db_url)
        s.upgrade()
        s.close()
        n = 4
    spool = _spool_at(tmp_path / "A", "lh", "box-a")
    procs = [_orch(db_url, tmp_path, str(spool), "--suite-dir", str(suite_dir)) for _ in range(n)]
    outs = [p.communicate(timeout=300) for p in procs]
    docs = []
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
        docs.append(json.loads(out))
    assert {(d["lines"], d["status"], d["results"]) for d in docs} == {(8, "completed", 3)}
    assert sum(d["new_lines"] for d in docs) == 8, [d["new_lines"] for d in docs]
    store = Store.from_url(db_url)
    try:
        detail = store.get_run(RUN_ID)
        assert (detail.status, detail.results, detail.errors) == ("completed", 3, 0)
        assert [r.seq for r in store.results(RUN_ID).items] == [2, 4, 6] and store.last_seq(RUN_ID, "lh") == 7
    finally:
        store.close()
