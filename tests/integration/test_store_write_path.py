"""The store's write path (``Store.ingest_many``, ``_apply``, ``_insert_results``, the row encoders) on SQLite and a
real PostgreSQL: what each event becomes, exactly — the mutation run of store/repo.py's write path
(docs/testing.md) found each of these unchecked by the other store tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy.dialects import sqlite

from orchestrator.protocol import Event
from orchestrator.store import compute, repo
from orchestrator.store.repo import Store


def _run(store: Store, hosts: list[str]) -> str:
    run_id = store.create_run(suite="moe-sweep", params={}, preset=None, label=None, hosts=hosts,
                              started_by="me@box", started_on="box")  # fmt: skip
    for h in hosts:
        store.start_host_run(run_id, h, facts={}, agent_version="v1", build_sha=None)
    return run_id


def test_a_batch_led_by_a_large_row_is_stored_exactly(store: Store) -> None:
    """A first row whose info is PG_RECORDSET_MAX_JSON_BYTES or more takes PostgreSQL's executemany path; SQLite
    has one path whatever the size. Either way every row reads back as it was sent."""
    run_id = _run(store, ["h1"])
    tail = "é ✓ " + "x" * repo.PG_RECORDSET_MAX_JSON_BYTES
    events = [
        Event(seq=0, type="result", ts=1_700_000_000.5, data={"case": {"M": 1}, "case_index": 0,
              "metrics": {"x": {"value": 1, "unit": "u"}}, "info": {"tail": tail}}),
        Event(seq=1, type="result", data={"case": {"M": 2}, "case_index": 1,
              "metrics": {"x": {"value": 2, "unit": "u", "samples": [1, 2]}}}),
    ]  # fmt: skip
    assert store.ingest(run_id, "h1", events) == 2
    rows = store.results(run_id).items
    assert [(r.seq, r.m, r.metrics["x"]["value"], r.info) for r in rows] == [
        (0, 1, 1.0, {"tail": tail}),
        (1, 2, 2.0, None),
    ]


@pytest.fixture
def tokyo() -> Iterator[None]:
    """The process's local time zone set to UTC+9 (no DST), restored afterwards."""
    import os

    old = os.environ.get("TZ")
    os.environ["TZ"] = "JST-9"
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old
        time.tzset()


def test_sqlite_times_are_utc_whatever_the_local_zone(tokyo: None) -> None:
    """SQLAlchemy's SQLite DATETIME stores naive UTC: a time given in another zone is converted to UTC, never to the
    machine's local zone."""
    when = datetime(2026, 11, 30, 23, 30, 0, 250_000, tzinfo=timezone(timedelta(hours=-7)))
    assert repo._sqlite_datetime(when) == "2026-12-01 06:30:00.250000"
    aware = compute.from_unix(1_700_000_000.0)
    assert aware is not None
    want = sqlite.DATETIME().bind_processor(sqlite.dialect())(aware.replace(tzinfo=None))  # type: ignore[misc]
    assert repo._sqlite_datetime(aware) == want == "2023-11-14 22:13:20.000000"

