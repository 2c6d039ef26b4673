"""The Store on SQLite and on a real PostgreSQL (``store`` fixture, tests/plugins/pg.py)."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import select

from orchestrator.errors import IncomparableError, NotFoundError, StoreError, UsageError
from orchestrator.protocol import Event
from orchestrator.store import repo
from orchestrator.store.models import Result
from orchestrator.store.records import RunFilter
from orchestrator.store.repo import Store
from tests.integration.conftest import hello, result_event


def _run(store: Store, *, suite: str = "moe-sweep", hosts: list[str] | None = None, label: str | None = None) -> str:
    hosts = hosts or ["h1", "h2"]
    for h in hosts:
        store.upsert_host(h, address=f"{h}.example", group="g", labels={"rack": "1"})
    run_id = store.create_run(
        suite=suite,
        params={"E": 8},
        preset="tiny",
        label=label,
        hosts=hosts,
        started_by="me@box",
        started_on="box",
    )
    for h in hosts:
        store.start_host_run(run_id, h, facts={"gpu": "x"}, agent_version="v1", build_sha=None)
    return run_id


def test_create_run_shapes(store: Store) -> None:
    run_id = _run(store)
    assert len(run_id) == 36 and run_id[14] == "7"  # UUIDv7
    run = store.get_run(run_id)
    assert run.status == "running" and run.hosts == ["h1", "h2"] and run.preset == "tiny"
    assert run.started_at.tzinfo is not None and run.finished_at is None
    assert [h.status for h in run.host_runs] == ["running", "running"]
    assert [(s.host, s.status, s.last_seq) for s in store.host_run_states(run_id)] == [
        ("h1", "running", -1),
        ("h2", "running", -1),
    ]
    later = _run(store)
    assert later > run_id  # time-sortable


def test_ingest_idempotent_and_resumable(store: Store) -> None:
    run_id = _run(store)
    events = [hello(0), *(result_event(i, 2**i, 1.0 + i) for i in range(1, 5))]
    assert store.ingest(run_id, "h1", events) == 4
    assert store.ingest(run_id, "h1", events) == 0
    assert store.last_seq(run_id, "h1") == 4
    assert store.last_seq(run_id, "h2") == -1
    more = [result_event(5, 32, 6.0), Event(seq=6, type="done", data={"counts": {"results": 5, "errors": 0}})]
    assert store.ingest(run_id, "h1", events + more) == 1
    hr = store.get_run(run_id).host_run("h1")
    assert hr is not None and hr.results == 5 and hr.errors == 0 and hr.done_counts == {
        "results": 5, "errors": 0, "status": "completed", "position": 6
    }
    assert hr.agent_version == "v1" and hr.cases_total == 4
    page = store.results(run_id, host="h1")
    assert page.total == 5 and [r.m for r in page.items] == [2, 4, 8, 16, 32]
    assert "samples" not in page.items[0].metrics["time_ms"]
    assert store.results(run_id, samples=True, limit=1).items[0].metrics["time_ms"]["samples"] == [
        0.95 * 2,
        2,
        1.05 * 2,
    ]


def test_ingest_stores_statistics_and_samples_apart(store: Store) -> None:
    """metrics keep value/unit/statistics; samples hold the raw samples by metric (NULL when none)."""
    run_id = _run(store)
    plain = Event(
        seq=2, type="result", ts=1_700_000_002.5, data={"case": {"M": 4}, "metrics": {"x": {"value": 1, "unit": "u"}}}
    )
    store.ingest(run_id, "h1", [hello(0), result_event(1, 2, 3.0, gbps=10.0), plain])
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(Result.seq, Result.metrics, Result.samples, Result.info, Result.ts).order_by(Result.seq)
        ).all()
    t = 3.0
    assert rows[0].metrics == {
        "time_ms": {"value": t, "unit": "ms", "median": t, "p10": t * 0.95, "p90": t * 1.05, "min": t * 0.9,
                    "max": t * 1.1, "n": 3},
        "gbps": {"value": 10.0, "unit": "GB/s", "median": 10.0},
    }  # fmt: skip
    assert rows[0].samples == {"time_ms": [3.0 * 0.95, 3.0, 3.0 * 1.05]}
    assert rows[1].samples is None and rows[1].info is None
    assert [r.ts for r in rows] == [
        datetime.fromtimestamp(1_700_000_001.0, timezone.utc),
        datetime.fromtimestamp(1_700_000_002.5, timezone.utc),
    ]
    items = store.results(run_id, samples=True).items
    assert items[0].metrics["time_ms"]["samples"] == [3.0 * 0.95, 3.0, 3.0 * 1.05]
    assert "samples" not in items[0].metrics["gbps"] and items[1].metrics == {"x": {"value": 1.0, "unit": "u"}}


def test_ingest_duplicates_within_batch_and_unique_backstop(store: Store) -> None:
    run_id = _run(store)
    ev = result_event(0, 8, 2.0)
    assert store.ingest(run_id, "h1", [ev, ev]) == 1
    # A racing writer that read an older last_seq: the unique constraint makes the insert a no-op.
    with store.engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE host_runs SET last_seq = -1 WHERE run_id = '{run_id}' AND host = 'h1'")
    assert store.ingest(run_id, "h1", [ev]) == 0
    assert store.results(run_id).total == 1


def test_errors_logs_and_unknown_events(store: Store) -> None:
    run_id = _run(store)
    events = [
        Event(seq=0, type="log", data={"level": "info", "message": "warming up"}),
        Event(seq=1, type="error", data={"message": "CUDA OOM", "case": {"M": 4096}, "case_index": 1}),
        Event(seq=2, type="error", data={"message": "malformed agent line 2 (not JSON)", "kind": "protocol"}),
        Event(seq=3, type="mystery", data={"x": 1}),
        Event(seq=4, type="result", data={"case": {"M": 1}, "metrics": {"time_ms": {"value": "fast"}}}),
        Event(seq=5, type="case_start", data={"case": {"M": 2}}),
    ]
    assert store.ingest(run_id, "h1", events) == 3
    hr = store.get_run(run_id).host_run("h1")
    assert hr is not None and hr.errors == 3 and hr.results == 0 and hr.last_seq == 5
    assert hr.log == "[info] warming up" and hr.error is None  # a host-level error is a row (below), not its text
    errs = store.results(run_id, status="error").items
    assert [(e.seq, e.m, e.status) for e in errs] == [(1, 4096, "error"), (2, None, "error"), (4, 1, "error")]
    assert errs[0].error == "CUDA OOM" and "malformed result" in (errs[2].error or "")
    assert errs[1].case == {} and "not JSON" in (errs[1].error or "")  # a protocol error is a row, with its seq


def test_finish_and_list_filters(store: Store) -> None:
    a = _run(store, label="baseline")
    b = _run(store, suite="hbm-bandwidth", hosts=["h3"])
    store.finish_host_run(a, "h1", "completed")
    store.finish_host_run(a, "h2", "failed", "ssh: connection lost")
    store.finish_run(a, "partial")
    run = store.get_run(a)
    assert run.status == "partial" and run.finished_at is not None
    assert run.host_run("h2").error == "ssh: connection lost"  # type: ignore[union-attr]
    assert [r.id for r in store.list_runs().items] == [b, a]
    assert store.list_runs(RunFilter(suite="moe-sweep")).total == 1
    assert [r.id for r in store.list_runs(RunFilter(host="h3")).items] == [b]
    assert [r.id for r in store.list_runs(RunFilter(status="partial", label="baseline")).items] == [a]
    future = datetime.now(timezone.utc) + timedelta(hours=1)
    assert store.list_runs(RunFilter(since=future)).total == 0
    assert store.list_runs(RunFilter(until=future)).total == 2
    page = store.list_runs(limit=1, offset=1)
    assert page.total == 2 and [r.id for r in page.items] == [a]
    with pytest.raises(ValueError):
        store.finish_run(a, "bogus")


def test_not_found_and_bad_ids(store: Store) -> None:
    with pytest.raises(NotFoundError) as e:
        store.get_run("0190a8b2-0000-7000-8000-000000000000")
    assert "orch runs list" in e.value.hint
    with pytest.raises(NotFoundError):
        store.get_run("../etc/passwd")
    run_id = _run(store)
    with pytest.raises(NotFoundError):
        store.ingest(run_id, "nope", [result_event(0, 1, 1.0)])
    assert store.resolve_run_id(run_id[:13]) == run_id
    with pytest.raises(UsageError):
        store.resolve_run_id("xyz")


def test_run_references_take_ascii_digits_only(store: Store) -> None:
    """``latest~N`` takes ASCII digits, like ``--set``: an Arabic-Indic one (U+0661) resolved to latest~1."""
    first = _run(store)
    _run(store)
    assert store.resolve_run_id("latest~1") == first
    for ref in ("latest~\u0661", "latest~\uff11", "latest~\u0967"):  # Arabic-Indic, fullwidth, Devanagari one
        with pytest.raises(UsageError) as e:
            store.resolve_run_id(ref)
        assert str(e.value) == f"invalid run id {ref!r}: its digits must be ASCII 0-9"
        assert "latest~N" in e.value.hint


def test_label_and_delete(store: Store) -> None:
    run_id = _run(store)
    store.ingest(run_id, "h1", [hello(0), result_event(1, 1, 1.0)])
    assert store.set_label(run_id, "nightly").label == "nightly"
    store.delete_run(run_id)
    with pytest.raises(NotFoundError):
        store.get_run(run_id)
    assert store.list_runs().total == 0
    with pytest.raises(NotFoundError):
        store.delete_run(run_id)


def test_series_latest_run_per_host(store: Store) -> None:
    old = _run(store)
    store.ingest(old, "h1", [result_event(i, 2**i, 100.0) for i in range(3)])
    new = _run(store)
    for h, scale in (("h1", 1.0), ("h2", 2.0)):
        store.ingest(new, h, [result_event(i, 2**i, scale * (i + 1)) for i in range(3)])
    s = store.series(suite="moe-sweep", metric="time_ms", x="M")
    assert s.unit == "ms" and [(ln.host, ln.run_id) for ln in s.lines] == [("h1", new), ("h2", new)]
    assert [(p.x, p.y) for p in s.lines[1].points] == [(1, 2.0), (2, 4.0), (4, 6.0)]
    assert s.lines[0].points[0].p10 == pytest.approx(0.95)
    by_run = store.series(suite="moe-sweep", metric="time_ms", group_by="run", hosts=["h1"])
    assert [ln.run_id for ln in by_run.lines] == [new, old]
    one = store.series(suite="moe-sweep", metric="time_ms", run_id=old)
    assert [ln.points[0].y for ln in one.lines] == [100.0]
    x_json = store.series(suite="moe-sweep", metric="time_ms", x="E")
    assert {p.x for p in x_json.lines[0].points} == {8.0}
    with pytest.raises(UsageError, match="no run of suite 'nope' is stored"):  # a typo is said, not an empty plot
        store.series(suite="nope", metric="time_ms")
    with pytest.raises(UsageError):
        store.series(suite="moe-sweep", metric="time_ms'); DROP TABLE runs; --")


def test_compare_pairs_cases_and_geomean(store: Store) -> None:
    base, head = _run(store), _run(store)
    store.ingest(base, "h1", [result_event(i, 2**i, 2.0) for i in range(4)])
    store.ingest(head, "h1", [result_event(i, 2**i, 1.0 if i < 2 else 4.0) for i in range(3)])
    c = store.compare(base, head)
    assert c.metric == "time_ms" and c.unit == "ms" and c.paired_on == "host+case"
    assert [(x.case["M"], x.ratio) for x in c.cases] == [(1, 0.5), (2, 0.5), (4, 2.0)]
    assert [x.case for x in c.cases] == [{"M": 2**i, "E": 8, "seed": i} for i in range(3)]  # the base run's
    assert c.geomean == pytest.approx((0.5 * 0.5 * 2.0) ** (1 / 3))
    assert c.only_base == 1 and c.only_head == 0
    # result_event's p10/p90 are median x 0.95/1.05: the ranges are apart and 10% spreads < 50%/100% changes
    assert [(x.base_p10, x.base_p90, x.head_p10, x.head_p90) for x in c.cases][2] == (1.9, 2.1, 3.8, 4.2)
    assert [(x.noisy, x.verdict) for x in c.cases] == [
        (False, "improvement"),
        (False, "improvement"),
        (False, "regression"),
    ]
    assert c.noisy == 0 and c.threshold == 0.05
    other = _run(store, hosts=["b300-0"])
    store.ingest(other, "b300-0", [result_event(i, 2**i, 1.0) for i in range(4)])
    cross = store.compare(base, other)
    assert cross.paired_on == "case" and cross.geomean == pytest.approx(0.5)
    assert [(x.host, x.case["M"], x.base, x.head) for x in cross.cases] == [(None, 2**i, 2.0, 1.0) for i in range(4)]
    with pytest.raises(NotFoundError):
        store.compare(base, head, metric="nope")


def test_measured_roof(store: Store) -> None:
    hbm = _run(store, suite="hbm-bandwidth", hosts=["h1"])
    store.ingest(hbm, "h1", [result_event(0, 0, 5.0, gbps=4000.0), result_event(1, 0, 5.0, gbps=4200.0)])
    moe = _run(store, hosts=["h1", "h2"])
    store.ingest(moe, "h1", [result_event(0, 1, 0.3, gbps=3150.0)])
    store.ingest(moe, "h2", [result_event(0, 1, 0.3, gbps=3150.0)])
    run = store.get_run(moe)
    assert [h.measured_roof_gbps for h in run.host_runs] == [4200.0, None]
    items = store.results(moe).items
    assert items[0].pct_of_measured_roof == pytest.approx(75.0) and items[1].pct_of_measured_roof is None
    assert store.results(hbm).items[0].pct_of_measured_roof is None


def test_info_hook(store: Store) -> None:
    run_id = _run(store)
    store.set_host_run_info(run_id, "h1", {"plateau": {"m": 256, "metric": "time_ms"}})
    store.set_run_info(run_id, {"summary": "ok"})
    run = store.get_run(run_id)
    assert run.info == {"summary": "ok"} and run.host_run("h1").info["plateau"]["m"] == 256  # type: ignore[union-attr]


def test_concurrent_writers_and_readers(store: Store) -> None:
    """Two hosts ingest while a reader polls: no 'database is locked', every row exactly once."""
    run_id = _run(store)
    failures: list[BaseException] = []

    def writer(host: str) -> None:
        try:
            for start in range(0, 200, 20):
                store.ingest(run_id, host, [result_event(i, i + 1, 1.0) for i in range(start, start + 20)])
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    def reader() -> None:
        try:
            for _ in range(30):
                store.list_runs()
                store.results(run_id, limit=10)
        except BaseException as exc:  # pragma: no cover
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(h,)) for h in ("h1", "h2")] + [threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert store.results(run_id).total == 400


def test_unmigrated_database_says_upgrade(db_url: str) -> None:
    s = Store.from_url(db_url)
    try:
        with pytest.raises(StoreError) as e:
            s.list_runs()
        assert "orch db upgrade" in e.value.hint
    finally:
        s.close()


def test_compare_reads_case_params_for_more_cases_than_one_in_list(store: Store) -> None:
    """Case parameters are fetched by id in chunks (SQLite caps bound parameters): every case gets its own."""
    base, head = _run(store, hosts=["h1"]), _run(store, hosts=["h1"])
    n = repo._IN_CHUNK + 50
    store.ingest(base, "h1", [result_event(i, i + 1, 2.0) for i in range(n)])
    store.ingest(head, "h1", [result_event(i, i + 1, 1.0) for i in range(n)])
    c = store.compare(base, head)
    assert [x.case["M"] for x in c.cases] == list(range(1, n + 1)) and c.geomean == pytest.approx(0.5)


def _stats_event(seq: int, m: int, median: float, p10: float | None, p90: float | None) -> Event:
    stats = {"value": median, "unit": "ms", "median": median, "p10": p10, "p90": p90}
    time_ms = {k: v for k, v in stats.items() if v is not None}
    return Event(seq=seq, type="result", data={"case": {"M": m}, "metrics": {"time_ms": time_ms}})


def test_compare_judges_noise_from_stored_p10_p90(store: Store) -> None:
    """Two runs of one tiny CPU sweep: M=64's 53 ms p90 tail makes its 0.236 ratio noise, not an improvement."""
    base, head = _run(store, hosts=["h1"]), _run(store, hosts=["h1"])
    store.ingest(base, "h1", [
        _stats_event(0, 1, 0.10, 0.099, 0.101),
        _stats_event(1, 16, 0.12, 0.11, 0.13),
        _stats_event(2, 64, 0.72, 0.16, 53.0),
        _stats_event(3, 128, 1.00, 0.985, 1.015),
        _stats_event(4, 256, 2.00, None, 2.1),
    ])  # fmt: skip
    store.ingest(head, "h1", [
        _stats_event(0, 1, 0.20, 0.199, 0.201),
        _stats_event(1, 16, 0.121, 0.11, 0.13),
        _stats_event(2, 64, 0.17, 0.165, 0.175),
        _stats_event(3, 128, 1.02, 1.016, 1.024),
        _stats_event(4, 256, 3.00, 2.9, 3.1),
    ])  # fmt: skip
    c = store.compare(base, head)
    assert [(x.case["M"], x.ratio, x.noisy, x.verdict) for x in c.cases] == [
        (1, 0.20 / 0.10, False, "regression"),
        (16, 0.121 / 0.12, True, "within noise"),  # ranges overlap
        # base's ln(53 / 0.16) spread far beyond the change, and its band sqrt(53 / 0.16) - 1 = 17 > 50%
        (64, 0.17 / 0.72, True, "noisy: not judged"),
        (128, 1.02, True, "within noise"),  # apart, but base's 3% spread > the 2% change
        (256, 1.5, None, "regression"),  # base has no p10: noise unknown, the threshold alone decides
    ]
    assert (c.cases[4].base_p10, c.cases[4].base_p90) == (None, 2.1)
    assert c.noisy == 3


def test_compare_noise_over_hosts_is_the_envelope(store: Store) -> None:
    """Runs on disjoint hosts pair on case: each side's range is the lowest p10 to the highest p90 of its hosts."""
    base, head = _run(store, hosts=["a1", "a2"]), _run(store, hosts=["b1"])
    store.ingest(base, "a1", [_stats_event(0, 1, 1.0, 0.99, 1.01)])
    store.ingest(base, "a2", [_stats_event(0, 1, 1.4, 1.39, 1.41)])
    store.ingest(head, "b1", [_stats_event(0, 1, 1.3, 1.29, 1.31)])
    (x,) = store.compare(base, head).cases
    assert (x.base, x.base_p10, x.base_p90) == (1.2, 0.99, 1.41) and x.noisy is True
    assert x.verdict == "within noise" and x.ratio == pytest.approx(1.3 / 1.2)


def test_compare_runs_of_different_suites_is_an_error(store: Store) -> None:
    base, head = _run(store, hosts=["h1"]), _run(store, suite="hbm-bandwidth", hosts=["h1"])
    store.ingest(base, "h1", [result_event(0, 1, 1.0)])
    store.ingest(head, "h1", [result_event(0, 1, 1.0)])
    with pytest.raises(IncomparableError) as e:
        store.compare(base, head)
    assert e.value.message == (
        f"run {base} is of suite 'moe-sweep' and run {head} of suite 'hbm-bandwidth': "
        "runs of different suites have no case in common"
    )
    assert e.value.exit_code == 2


def test_compare_runs_sharing_no_case_is_an_error(store: Store) -> None:
    base, head = _run(store, hosts=["h1"]), _run(store, hosts=["h1"])
    store.ingest(base, "h1", [result_event(i, 2**i, 1.0) for i in range(2)])
    store.ingest(head, "h1", [result_event(i, 2 ** (i + 5), 1.0, gbps=1.0) for i in range(3)])
    with pytest.raises(IncomparableError) as e:
        store.compare(base, head)
    assert e.value.message == (
        f"runs {base} and {head} (suite 'moe-sweep') share no case with metric 'time_ms': base has 2 cases, "
        "head has 3 (paired on host+case: only the hosts both ran are compared)"
    )
    with pytest.raises(IncomparableError, match="base has 0 cases, head has 3"):
        store.compare(base, head, metric="gbps")  # the metric is in one run only


def test_sqlite_ingest_stores_the_rows_sqlalchemys_own_insert_would(tmp_path: Path) -> None:
    """The SQLite fast path encodes JSON and datetimes itself: byte for byte what the column types would store."""
    from sqlalchemy import text
    from sqlalchemy.dialects import sqlite

    from orchestrator.store.models import HostRun

    store = Store.from_url(f"sqlite:///{tmp_path}/o.db")
    store.upgrade()
    events = [
        hello(0),
        result_event(1, 2, 3.0, gbps=10.0, note="é ✓"),
        Event(seq=2, type="result", data={"case": {"M": 4}, "metrics": {"x": {"value": 1, "unit": "u"}}}),
        Event(seq=3, type="error", ts=1_700_000_003.25, data={"message": "OOM", "case": {"M": 8}, "case_index": 2}),
        Event(seq=4, type="error", data={"message": "agent line 4 claims seq 9", "kind": "protocol"}),
    ]
    fast = _run(store, hosts=["h1"])
    store.ingest(fast, "h1", events)
    ref = _run(store, hosts=["h1"])
    rows: list[dict[str, object]] = []
    dummy = HostRun(run_id=ref, host="h1", status="running", last_seq=-1, results=0, errors=0, info={})
    for ev in events:  # the reference: the same row dicts through SQLAlchemy's INSERT and column types
        store._apply(dummy, ev, rows, ref, "h1")
    with store.engine.begin() as conn:
        conn.execute(sqlite.insert(Result.__table__), rows)  # type: ignore[arg-type]
        cols = ", ".join(f"quote({c.name})" for c in Result.__table__.c if c.name not in ("id", "run_id"))
        got = {rid: conn.execute(text(f"SELECT {cols} FROM results WHERE run_id = :r ORDER BY seq"), {"r": rid}).all()
               for rid in (fast, ref)}  # fmt: skip
    assert len(got[fast]) == 4 and got[fast] == got[ref]
    assert got[fast][2][-1] == "'2023-11-14 22:13:23.250000'"  # ts, naive UTC
    store.close()


def test_reingest_skips_what_is_stored_log_error_text_and_counts_included(store: Store) -> None:
    """Issue 19: with the ``seq <= last_seq`` skip removed, only the unique key kept result rows single; the
    host run's log and error text (and error rows' counts) doubled on every reattach."""
    run_id = _run(store)
    case8 = {"M": 8, "E": 8, "seed": 4}
    events = [
        hello(0),
        Event(seq=1, type="log", data={"level": "info", "message": "warming up"}),
        Event(seq=2, type="error", data={"message": "GPU 0 clocks throttled"}),
        result_event(3, 4, 2.0),
        Event(seq=4, type="error", data={"message": "CUDA out of memory", "case": case8, "case_index": 4}),
    ]
    assert store.ingest(run_id, "h1", events) == 3  # the result and both errors (host-level ones too) are rows
    for _ in range(2):  # a reattach re-reads from an older seq: the same lines again
        assert store.ingest(run_id, "h1", events) == 0
    hr = store.get_run(run_id).host_run("h1")
    assert hr is not None
    assert (hr.log, hr.error) == ("[info] warming up", None)  # the host-level error is a row, stored once
    assert (hr.results, hr.errors, hr.last_seq) == (1, 2, 4)
    page = store.results(run_id, host="h1")
    assert sorted((r.seq, r.status) for r in page.items) == [(2, "error"), (3, "ok"), (4, "error")]


def test_host_run_info_is_merged_not_overwritten(store: Store) -> None:
    """Issue 19: what the runner records at start (spec, preset, GPU spec) must survive what it records at the
    end (reconnects, plateau)."""
    run_id = _run(store)
    start = {"spec": {"bench": "moe_gemm", "M": [1, 2]}, "preset": "tiny", "gpu_spec": "h200-sxm"}
    store.set_host_run_info(run_id, "h1", start)
    store.set_host_run_info(run_id, "h1", {"reconnects": 1, "plateau": {"m": 2, "metric": "time_ms"}})
    store.set_host_run_info(run_id, "h1", {"reconnects": 2})  # a later value of one key replaces only that key
    hr = store.get_run(run_id).host_run("h1")
    assert hr is not None and hr.info == {**start, "reconnects": 2, "plateau": {"m": 2, "metric": "time_ms"}}
    store.set_run_info(run_id, {"summary": "ok"})
    store.set_run_info(run_id, {"geomean": 1.5})
    assert store.get_run(run_id).info == {"summary": "ok", "geomean": 1.5}


@pytest.mark.parametrize(
    ("metric", "unit", "head_value", "expected"),
    [
        ("gbps", "GB/s", 50.0, "regression"),  # half the bandwidth: worse
        ("gbps", "GB/s", 200.0, "improvement"),
        ("output_throughput", "tokens/s", 80.0, "regression"),
        ("time_ms", "ms", 50.0, "improvement"),  # half the time: better
        ("time_ms", "ms", 200.0, "regression"),
    ],
)
def test_compare_verdict_follows_the_metric_direction(
    store: Store, metric: str, unit: str, head_value: float, expected: str
) -> None:
    """Issue 19: the stored compare judged every metric lower-is-better and no test looked past ``time_ms``."""

    def ev(seq: int, value: float) -> Event:
        m = {metric: {"value": value, "unit": unit, "median": value, "p10": value * 0.99, "p90": value * 1.01}}
        return Event(seq=seq, type="result", data={"case_index": 0, "case": {"M": 1}, "metrics": m})

    base, head = _run(store, hosts=["h1"]), _run(store, hosts=["h1"])
    store.ingest(base, "h1", [ev(0, 100.0)])
    store.ingest(head, "h1", [ev(0, head_value)])
    c = store.compare(base, head, metric=metric)
    assert [(x.ratio, x.noisy, x.verdict) for x in c.cases] == [(head_value / 100.0, False, expected)]


def test_a_reopened_host_run_keeps_its_earlier_error_as_history_not_as_its_error(store: Store) -> None:
    """A host run's ``error`` is the reason for its current status only: one that ended ``failed`` (a lost
    connection) and that a resume follows again carries the old text in ``earlier_errors``, never in ``error``."""
    run_id = _run(store)
    store.start_host_run(run_id, "h1", facts={}, agent_version="a", build_sha=None)
    store.reopen_host_run(run_id, "h1")  # not ended yet: left as it is
    hr = store.get_run(run_id).host_run("h1")
    assert hr is not None and (hr.status, hr.error, hr.earlier_errors) == ("running", None, [])
    store.finish_host_run(run_id, "h1", "failed", "lost the connection: sshd down")
    store.reopen_host_run(run_id, "h1")
    hr = store.get_run(run_id).host_run("h1")
    assert hr is not None and (hr.status, hr.error, hr.finished_at) == ("running", None, None)
    [earlier] = hr.earlier_errors
    assert (earlier["status"], earlier["error"]) == ("failed", "lost the connection: sshd down"), earlier
    store.finish_host_run(run_id, "h1", "completed")
    hr = store.get_run(run_id).host_run("h1")
    assert hr is not None and (hr.status, hr.error, len(hr.earlier_errors)) == ("completed", None, 1)
