"""The store's write path (``Store.ingest_many``, ``_apply``, ``_insert_results``, the row encoders) on SQLite and a
real PostgreSQL: what each event becomes, exactly — the mutation run of store/repo.py's write path
(docs/testing.md) found each of these unchecked by the other store tests."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import text, update
from sqlalchemy.dialects import sqlite

from orchestrator.errors import NotFoundError
from orchestrator.protocol import Event
from orchestrator.store import compute, repo
from orchestrator.store.models import HostRun
from orchestrator.store.records import HostRunRecord
from orchestrator.store.repo import Store
from tests.integration.conftest import started_run

_run = started_run


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
    want = sqlite.DATETIME().bind_processor(sqlite.dialect())(aware.replace(tzinfo=None))  # type: ignore[no-untyped-call]
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


def test_the_backstop_gives_a_host_runs_new_rows_to_its_first_batch_of_the_call(store: Store) -> None:
    run_id = _run(store, ["h1"])
    store.ingest(run_id, "h1", [_ok(0), _error(1)])
    with store.engine.begin() as conn:
        conn.execute(update(HostRun).where(HostRun.run_id == run_id).values(last_seq=-1))
    got = store.ingest_many([(run_id, "h1", [_ok(0), _error(1), _ok(2)]), (run_id, "h1", [_error(3), _ok(4)])])
    assert got == [3, 0]  # 5 rows sent, 2 already stored: the 3 new ones counted once, on the first batch
    assert _counts(store, run_id) == {"h1": (4, 3, 2)}


def _host(store: Store, run_id: str, host: str = "h1") -> HostRunRecord:
    rec = store.get_host_run(run_id, host)
    assert rec is not None
    return rec


def test_a_host_level_lines_stand_ins_go_to_the_log_and_a_rows_stay_in_the_row(store: Store) -> None:
    run_id = _run(store, ["h1"])
    hello_nul = Event(seq=0, type="hello", data={"facts": {"a": "x\x00", "b": "\x00\x00"}})
    store.ingest(run_id, "h1", [hello_nul])
    said = (
        "[warn] orch stored line 0.facts.a: 1 NUL (U+0000) stored as U+2400 (\u2400); "
        "line 0.facts.b: 2 NUL (U+0000) stored as U+2400 (\u2400)"
    )
    assert _host(store, run_id).log == said
    result_nul = Event(seq=1, type="result", data={"case": {"s": "\x00"}, "metrics": {"x": {"value": 1, "unit": "u"}}})
    error_nul = Event(seq=2, type="error", data={"message": "m\x00", "case": {"M": 1}})
    store.ingest(run_id, "h1", [result_nul, error_nul])
    assert _host(store, run_id).log == said  # the rows say it in info.stored_as, the host's log does not
    infos = [r.info for r in store.results(run_id).items]
    assert infos == [
        {"stored_as": ["line 1.case.s: 1 NUL (U+0000) stored as U+2400 (\u2400)"]},
        {"stored_as": ["line 2.message: 1 NUL (U+0000) stored as U+2400 (\u2400)"]},
    ]


def test_error_rows_texts_and_their_empty_metrics(store: Store) -> None:
    run_id = _run(store, ["h1"])
    events = [
        Event(seq=0, type="error", data={"message": "nvidia-smi timed out"}),
        Event(seq=1, type="error", data={}),  # no message: the Store.ingest API still stores a row saying so
        Event(seq=2, type="error", data={"case": {"M": 2}, "case_index": 2}),
        Event(seq=3, type="result", data={"case": {"M": 3}, "case_index": 3, "metrics": {"x": {"value": "1"}}}),
    ]
    store.ingest(run_id, "h1", events)
    rows = store.results(run_id).items
    assert [(r.seq, r.status, r.error) for r in rows] == [
        (0, "error", "nvidia-smi timed out"),
        (1, "error", "error"),
        (2, "error", "error"),
        (3, "error", "malformed result: metric 'x' needs a finite number 'value' and a string 'unit'"),
    ]
    assert _host(store, run_id).error is None  # host-level ones are rows; the host's error is its verdict's
    with store.engine.begin() as conn:
        stored = conn.execute(text("SELECT CAST(metrics AS TEXT) FROM results ORDER BY seq")).scalars().all()
    assert [json.loads(m) for m in stored] == [{}, {}, {}, {}]  # an empty object, never JSON null


def test_log_lines_without_level_or_message(store: Store) -> None:
    run_id = _run(store, ["h1"])
    store.ingest(run_id, "h1", [Event(seq=0, type="log", data={"level": "warn"}),
                                Event(seq=1, type="log", data={"message": "up"})])  # fmt: skip
    assert _host(store, run_id).log == "[warn] \n[info] up"


def test_hello_fills_what_is_unknown_once(store: Store) -> None:
    """A host run added before its agent said hello (a Slurm job's nodes: ``add_host_runs``) takes the facts, the
    agent version and the number of cases from the first hello; a later hello changes none of them; a number of
    cases past the 32-bit column is not stored."""
    run_id = store.create_run(suite="moe-sweep", params={}, preset=None, label=None, hosts=["h1"],
                              started_by="me@box", started_on="box")  # fmt: skip
    store.add_host_runs(run_id, ["n1", "n2"])
    first = Event(seq=0, type="hello", data={"agent_version": "v2", "facts": {"gpu": "H200"}, "cases_total": 6})
    again = Event(seq=1, type="hello", data={"agent_version": "v3", "facts": {"gpu": "B300"}, "cases_total": 9})
    huge = Event(seq=0, type="hello", data={"agent_version": "v2", "cases_total": 2**31})
    store.ingest_many([(run_id, "n1", [first, again]), (run_id, "n2", [huge])])
    n1, n2 = _host(store, run_id, "n1"), _host(store, run_id, "n2")
    assert (n1.agent_version, n1.facts, n1.cases_total) == ("v2", {"gpu": "H200"}, 6)
    assert (n2.agent_version, n2.cases_total) == ("v2", None)


def test_the_indexed_axes_of_a_row(store: Store) -> None:
    """``m`` (from ``m`` or ``M``), ``concurrency`` (32-bit column) and ``size_bytes`` (64-bit) are copied from the
    case to their indexed columns; a value the column cannot hold is left NULL (the case keeps it)."""
    run_id = _run(store, ["h1"])
    metrics = {"x": {"value": 1, "unit": "u"}}
    cases = [{"m": 5, "concurrency": 64, "size_bytes": 2**40}, {"M": 7, "concurrency": 2**31, "size_bytes": 8},
             {"concurrency": 2**31 - 1}]  # fmt: skip
    store.ingest(run_id, "h1", [Event(seq=i, type="result", data={"case": c, "case_index": i, "metrics": metrics})
                                for i, c in enumerate(cases)])  # fmt: skip
    rows = store.results(run_id).items
    assert [(r.m, r.concurrency, r.size_bytes) for r in rows] == [(5, 64, 2**40), (7, None, 8), (None, 2**31 - 1, None)]
    assert rows[1].case == {"M": 7, "concurrency": 2**31, "size_bytes": 8}


def test_an_info_that_is_not_an_object_is_not_stored_as_one(store: Store) -> None:
    run_id = _run(store, ["h1"])
    ev = Event(seq=0, type="result", data={"case": {}, "metrics": {"x": {"value": 1, "unit": "u"}}, "info": [1, 2]})
    store.ingest(run_id, "h1", [ev])
    assert [r.info for r in store.results(run_id).items] == [None]


def test_an_unknown_host_run_is_named_with_its_hint(store: Store) -> None:
    run_id = _run(store, ["h1"])
    with pytest.raises(NotFoundError) as err:
        store.ingest(run_id, "h9", [_ok(0)])
    assert (err.value.message, err.value.hint) == (
        f"no host 'h9' in run {run_id!r}",
        "the run's hosts are fixed by create_run; check the run id",
    )


def test_what_an_earlier_call_stored_on_the_host_run_is_kept_by_the_next(store: Store) -> None:
    """Each call reads the host run afresh: its number of cases kept, its error rows counted (a host-level error
    is a row, never the host run's error text, which is its verdict's)."""
    run_id = _run(store, ["h1"])
    store.ingest(run_id, "h1", [Event(seq=0, type="hello", data={"cases_total": 3}), Event(seq=1, type="error",
                                data={"message": "first"})])  # fmt: skip
    store.ingest(run_id, "h1", [Event(seq=2, type="hello", data={"cases_total": 5}), Event(seq=3, type="error",
                                data={"message": "second"})])  # fmt: skip
    rec = _host(store, run_id)
    assert (rec.cases_total, rec.errors, rec.error) == (3, 2, None)
