"""The store's PostgreSQL write path: which of its two INSERTs a batch takes (``Store._insert_results``), judged by
the size of its first row's JSON (``_pg_row_json_bytes`` against ``PG_RECORDSET_MAX_JSON_BYTES``), on a real
PostgreSQL — the mutation run of its PostgreSQL-only branches (docs/testing.md, "store/repo.py's PostgreSQL write
path (session 5)") found these unchecked. That both paths store the same rows is
``test_store_ingest_many.py::test_postgres_rows_with_a_large_info_store_what_sqlalchemys_own_insert_would``."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import event

from orchestrator.protocol import Event
from orchestrator.store import repo
from orchestrator.store.repo import Store
from tests.integration.conftest import started_run


def test_a_rows_json_size_is_its_info_and_its_samples_as_stored() -> None:
    # compact JSON: None is "null" (4); {"a":1} is 7 characters, {"x":[1.0,2.5]} 15; samples None adds nothing
    assert repo._pg_row_json_bytes({"info": None, "samples": None}) == 4
    assert repo._pg_row_json_bytes({"info": {"a": 1}, "samples": None}) == 7
    assert repo._pg_row_json_bytes({"info": {"a": 1}, "samples": {"x": [1.0, 2.5]}}) == 7 + 15
    assert repo._pg_row_json_bytes({"info": None, "samples": {"x": [1.0, 2.5]}}) == 4 + 15


def _result(seq: int, info_chars: int, samples: list[int] | None = None) -> Event:
    metric: dict[str, Any] = {"value": 1, "unit": "u"}
    if samples is not None:
        metric["samples"] = samples
    return Event(seq=seq, type="result", ts=1_700_000_000.0 + seq, data={"case": {"M": seq + 1}, "case_index": seq,
                 "metrics": {"x": metric}, "info": {"t": "x" * info_chars}})  # fmt: skip


@pytest.mark.postgres
def test_postgres_sends_a_batch_by_executemany_from_the_threshold_on(pg_url: str) -> None:
    """A first row of PG_RECORDSET_MAX_JSON_BYTES (4096) or more goes by the ``VALUES (%s, .., %s::json, ..)``
    statement (one executemany of JSON text; SQLAlchemy executes a batch of one row once), one below by the single
    ``json_to_recordset`` statement; its samples count towards the size. Every row is stored."""
    assert repo.PG_RECORDSET_MAX_JSON_BYTES == 4096
    store = Store.from_url(pg_url)
    store.upgrade()
    sent: list[str] = []  # which INSERT INTO results each batch took

    def seen(conn: Any, cursor: Any, statement: str, params: Any, context: Any, executemany: bool) -> None:
        if statement.startswith("INSERT INTO results"):
            sent.append("recordset" if "json_to_recordset" in statement else "many" if "%s::json" in statement else "?")

    event.listen(store.engine, "before_cursor_execute", seen)
    try:
        _ingest_at_the_threshold(store, sent)
    finally:
        store.close()


def _ingest_at_the_threshold(store: Store, sent: list[str]) -> None:
    run_id = started_run(store, ["h1"])
    # info {"t":"x…x"} is 8 characters + the x's: 4087 x's make 4095, 4088 make 4096; samples {"x":[1,2]} add 11
    batches = [_result(0, 4087), _result(1, 4088), _result(2, 4076, [1, 2]), _result(3, 4077, [1, 2])]
    for ev in batches:
        assert store.ingest(run_id, "h1", [ev]) == 1
    assert sent == ["recordset", "many", "recordset", "many"]
    stored = store.results(run_id).items
    assert [(r.seq, len(r.info["t"]) if r.info else None) for r in stored] == [
        (0, 4087),
        (1, 4088),
        (2, 4076),
        (3, 4077),
    ]
