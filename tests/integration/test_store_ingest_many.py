"""``Store.ingest_many``: several host runs' batches in one transaction, on SQLite and a real PostgreSQL."""

from __future__ import annotations

from datetime import timedelta, timezone

import pytest
from sqlalchemy import update

from orchestrator.errors import NotFoundError
from orchestrator.protocol import Event
from orchestrator.store import compute, repo
from orchestrator.store.models import HostRun
from orchestrator.store.repo import Store
from tests.integration.conftest import hello, result_event, started_run

_run = started_run


def _counts(store: Store, run_id: str) -> dict[str, tuple[int, int, int]]:
    return {h.host: (h.last_seq, h.results, h.errors) for h in store.get_run(run_id).host_runs}


def test_batches_of_several_hosts_and_runs_in_one_call(store: Store) -> None:
    a, b = _run(store, ["h1", "h2", "h3"]), _run(store, ["h1"])
    err = Event(seq=3, type="error", data={"message": "CUDA OOM", "case": {"M": 8}, "case_index": 2})
    got = store.ingest_many([
        (a, "h1", [hello(0), result_event(1, 1, 1.0), result_event(2, 2, 2.0)]),
        (a, "h2", [hello(0), result_event(1, 1, 3.0)]),
        (b, "h1", [hello(0)]),
        (a, "h1", [err, result_event(4, 4, 4.0)]),  # the same host run again: applied after its first batch
    ])  # fmt: skip
    assert got == [2, 1, 0, 2]
    assert _counts(store, a) == {"h1": (4, 3, 1), "h2": (1, 1, 0), "h3": (-1, 0, 0)}
    assert _counts(store, b) == {"h1": (0, 0, 0)}
    rows = store.results(a, host="h1", limit=10).items
    assert [(r.seq, r.status, r.m) for r in rows] == [(1, "ok", 1), (2, "ok", 2), (3, "error", 8), (4, "ok", 4)]
    assert store.ingest_many([]) == []


def test_redelivered_positions_are_skipped_per_host(store: Store) -> None:
    run_id = _run(store, ["h1", "h2"])
    first = [hello(0), result_event(1, 1, 1.0)]
    assert store.ingest_many([(run_id, "h1", first), (run_id, "h2", first)]) == [1, 1]
    # a reconnect re-delivers h1's lines from 0 with one new one; h2 gets its next line
    got = store.ingest_many(
        [(run_id, "h1", [*first, result_event(2, 2, 2.0)]), (run_id, "h2", [result_event(2, 4, 1.0)])]
    )
    assert got == [1, 1]
    assert _counts(store, run_id) == {"h1": (2, 2, 0), "h2": (2, 2, 0)}


def test_one_bad_batch_stores_nothing_of_the_call(store: Store) -> None:
    run_id = _run(store, ["h1", "h2"])
    good = (run_id, "h1", [hello(0), result_event(1, 1, 1.0)])
    with pytest.raises(ValueError, match="position 5 follows -1"):
        store.ingest_many([good, (run_id, "h2", [result_event(5, 1, 1.0)])])
    with pytest.raises(NotFoundError, match="no host 'nope'"):
        store.ingest_many([good, (run_id, "nope", [hello(0)])])
    assert _counts(store, run_id) == {"h1": (-1, 0, 0), "h2": (-1, 0, 0)}
    assert store.results(run_id).total == 0


def test_unique_backstop_recounts_each_host_run(store: Store) -> None:
    run_id = _run(store, ["h1", "h2"])
    store.ingest_many([(run_id, "h1", [result_event(0, 1, 1.0)]), (run_id, "h2", [result_event(0, 1, 1.0)])])
    with store.engine.begin() as conn:  # a racing writer that read an older last_seq for h1
        conn.execute(update(HostRun).where(HostRun.run_id == run_id, HostRun.host == "h1").values(last_seq=-1))
    got = store.ingest_many([(run_id, "h1", [result_event(0, 1, 1.0), result_event(1, 2, 1.0)]),
                             (run_id, "h2", [result_event(1, 2, 1.0)])])  # fmt: skip
    assert got == [1, 1]  # h1's line 0 was already stored: the backstop dropped it, and the counts say so
    assert _counts(store, run_id) == {"h1": (1, 2, 0), "h2": (1, 2, 0)}
    assert store.results(run_id).total == 4


@pytest.mark.parametrize(
    "ts", [1_700_000_003.25, 0.0, -1.5, 1_800_000_000.9999996, -61_000_000_000.000001, 253_402_300_799.5]
)
def test_sqlite_timestamps_are_written_as_sqlalchemys_datetime_type_would(ts: float) -> None:
    """The SQLite fast path formats ``ts`` itself; SQLAlchemy's own DATETIME processor is the reference (years
    before 1000 zero-padded, microseconds always written, UTC without an offset)."""
    from sqlalchemy.dialects import sqlite

    when = compute.from_unix(ts)
    assert when is not None
    want = sqlite.DATETIME().bind_processor(sqlite.dialect())(when.replace(tzinfo=None))  # type: ignore[misc]
    assert repo._sqlite_datetime(when) == want
    assert repo._sqlite_datetime(when.astimezone(timezone(timedelta(hours=-7)))) == want


@pytest.mark.postgres
def test_postgres_rows_with_a_large_info_store_what_sqlalchemys_own_insert_would(pg_url: str) -> None:
    """PostgreSQL writes a batch whose first row's info is large by executemany of JSON text (others by
    json_to_recordset): it stores, value for value, what SQLAlchemy's INSERT of the same row dicts stores, JSON
    null included; rows skipped on conflict count 0."""
    from sqlalchemy import text
    from sqlalchemy.dialects import postgresql

    from orchestrator.store.models import Result

    store = Store.from_url(pg_url)
    store.upgrade()
    big = {"stdout": {"head": "é ✓ " + "x" * repo.PG_RECORDSET_MAX_JSON_BYTES, "bytes": 9}, "n": None}
    with_samples = result_event(2, 8, 3.0, gbps=10.0, note="é ✓")
    batches = {
        "large": [
            Event(seq=0, type="result", ts=1_700_000_003.25, data={"case": {"M": 1}, "case_index": 0,
                  "metrics": {"x": {"value": 1, "unit": "u"}}, "info": big}),
            Event(seq=1, type="result", data={"case": {"M": 2}, "metrics": {"x": {"value": 2, "unit": "u"}}}),
            Event(seq=2, type="result", ts=with_samples.ts, data={**with_samples.data, "info": big}),
            Event(seq=3, type="error", data={"message": "OOM", "case": {"M": 8}, "case_index": 2}),
        ],
    }  # fmt: skip
    cols = ", ".join(f"{c.name}::text" for c in Result.__table__.c if c.name not in ("id", "run_id"))
    for events in batches.values():
        fast, ref = _run(store, ["h1"]), _run(store, ["h1"])
        assert store.ingest(fast, "h1", events) == len(events)
        rows: list[dict[str, object]] = []
        dummy = HostRun(run_id=ref, host="h1", status="running", last_seq=-1, results=0, errors=0, info={})
        for ev in events:
            store._apply(dummy, ev, rows, ref, "h1")
        with store.engine.begin() as conn:
            conn.execute(postgresql.insert(Result.__table__), rows)  # type: ignore[arg-type]
            select_rows = text(f"SELECT {cols} FROM results WHERE run_id = :r ORDER BY seq")
            got = {rid: conn.execute(select_rows, {"r": rid}).all() for rid in (fast, ref)}
        assert len(got[fast]) == len(events) and got[fast] == got[ref]
        with store.engine.begin() as conn:  # a racing writer: the rows are there, last_seq is not
            conn.execute(update(HostRun).where(HostRun.run_id == fast).values(last_seq=-1))
        assert store.ingest(fast, "h1", events) == 0
        assert store.results(fast).total == len(events)
    store.close()


def test_host_run_fields_written_back_per_host(store: Store) -> None:
    """The host runs are read and written by Core: what each event sets lands on its own host run, and only there."""
    run_id = store.create_run(suite="moe-sweep", params={}, preset=None, label=None, hosts=["a", "b", "c"],
                              started_by="me@box", started_on="box")  # fmt: skip
    store.start_host_run(run_id, "b", facts={"gpu": "x"}, agent_version="v1", build_sha=None)
    done = Event(seq=4, type="done", data={"status": "completed", "counts": {"lines": 4, "results": 1, "errors": 1}})
    a_events = [
        hello(0),
        Event(seq=1, type="log", data={"level": "warn", "message": "clocks not locked"}),
        Event(seq=2, type="error", data={"message": "nvidia-smi timed out"}),
        result_event(3, 8, 1.5),
        done,
    ]
    got = store.ingest_many([(run_id, "a", a_events), (run_id, "b", [hello(0), result_event(1, 1, 2.0)])])
    assert got == [2, 1]
    recs = {h: store.get_host_run(run_id, h) for h in ("a", "b", "c")}
    a, b, c = recs["a"], recs["b"], recs["c"]
    assert a is not None and b is not None and c is not None
    assert a.facts == {"gpus": [{"name": "NVIDIA H200"}]} and a.cases_total == 4
    assert a.log == "[warn] clocks not locked" and a.error is None  # the host-level error is a row
    assert a.done_counts == {"lines": 4, "results": 1, "errors": 1, "status": "completed", "position": 4}
    assert (a.last_seq, a.results, a.errors) == (4, 1, 1)
    assert b.facts == {"gpu": "x"} and b.cases_total == 4  # facts already known are kept; the total was unknown
    assert (b.last_seq, b.results, b.errors, b.log, b.error, b.done_counts) == (1, 1, 0, None, None, None)
    assert (c.last_seq, c.results, c.errors, c.facts, c.cases_total) == (-1, 0, 0, None, None)
    # a second call appends to the texts of the first
    store.ingest_many([(run_id, "a", [Event(seq=5, type="log", data={"message": "again"})])])
    a2 = store.get_host_run(run_id, "a")
    assert a2 is not None and a2.log == "[warn] clocks not locked\n[info] again" and a2.last_seq == 5
