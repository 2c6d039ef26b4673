"""The store's write path (``Store.ingest_many``, ``_apply``, ``_insert_results``, the row encoders) on SQLite and a
real PostgreSQL: what each event becomes, exactly — the mutation run of store/repo.py's write path
(docs/testing.md) found each of these unchecked by the other store tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import update
from sqlalchemy.dialects import sqlite

from orchestrator.protocol import Event
from orchestrator.store import compute, repo
from orchestrator.store.models import HostRun
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


def _counts(store: Store, run_id: str) -> dict[str, tuple[int, int, int]]:
    return {h.host: (h.last_seq, h.results, h.errors) for h in store.get_run(run_id).host_runs}


def _error(seq: int) -> Event:
    return Event(seq=seq, type="error", data={"message": "OOM", "case": {"M": seq}, "case_index": seq})


def _ok(seq: int) -> Event:
    return Event(seq=seq, type="result", data={"case": {"M": seq}, "case_index": seq,
                                               "metrics": {"x": {"value": 1, "unit": "u"}}})  # fmt: skip


def test_the_unique_backstop_recounts_ok_and_error_rows_of_each_host_run_of_its_own_run(store: Store) -> None:
    """A racing writer stored h1's first lines (its last_seq is stale): the backstop drops them and every host run
    of the call is recounted from the table — ok and error rows apart, only its own run's rows (``other`` holds
    rows of a host of the same name), and a host run with no row at all counts 0 and 0."""
    run_id, other = _run(store, ["h1", "h2", "h3"]), _run(store, ["h1"])
    store.ingest_many([(other, "h1", [_ok(0), _ok(1), _error(2)])])
    store.ingest_many([(run_id, "h1", [_ok(0), _error(1)]), (run_id, "h2", [_error(0)])])
    with store.engine.begin() as conn:  # the racing writer read h1's last_seq before the lines above
        conn.execute(update(HostRun).where(HostRun.run_id == run_id, HostRun.host == "h1").values(last_seq=-1))
    log = Event(seq=0, type="log", data={"message": "starting"})
    got = store.ingest_many([(run_id, "h1", [_ok(0), _error(1), _ok(2), _error(3)]), (run_id, "h3", [log]),
                             (run_id, "h2", [_ok(1)])])  # fmt: skip
    assert got == [2, 0, 1]
    assert _counts(store, run_id) == {"h1": (3, 2, 2), "h2": (1, 1, 1), "h3": (0, 0, 0)}
    assert _counts(store, other) == {"h1": (2, 2, 1)}
    assert store.results(run_id).total == 6


def test_a_gap_in_positions_is_refused_with_the_host_run_and_both_positions(store: Store) -> None:
    run_id = _run(store, ["h1"])
    store.ingest(run_id, "h1", [_ok(0)])
    with pytest.raises(ValueError) as err:
        store.ingest(run_id, "h1", [_ok(1), _ok(3)])
    assert str(err.value) == (f"ingest for h1 in run {run_id}: position 3 follows 1; positions must be contiguous")
    assert _counts(store, run_id) == {"h1": (0, 1, 0)}  # nothing of the batch stored
