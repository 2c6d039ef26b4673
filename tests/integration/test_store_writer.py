"""The store writer (``store_writer.IngestWriter``) over a real store, SQLite and PostgreSQL, through the runner's
store thread (``runner.StoreWriter``): many hosts' batches committed across hosts, nothing reported before it is
committed, one bad host failing alone, and Ctrl-C's drain committing what was queued."""

from __future__ import annotations

import asyncio

import pytest

from orchestrator.protocol import Event
from orchestrator.runner import StoreWriter
from orchestrator.store.repo import Store
from orchestrator.store_writer import Batch, IngestWriter
from tests.integration.conftest import hello, result_event, started_run

HOSTS = [f"n{i:03d}" for i in range(40)]


_run = started_run


def _lines(start: int, n: int) -> list[Event]:
    return [hello(0) if s == 0 else result_event(s, s, 1.0 + s) for s in range(start, start + n)]


def test_hosts_batches_are_committed_across_hosts_and_in_order(store: Store) -> None:
    run_id = _run(store, HOSTS)
    thread = StoreWriter(store)

    async def main() -> IngestWriter:
        w = IngestWriter(lambda b: thread.call(store.ingest_many, b), batch_max=500)

        async def host(name: str) -> None:
            for k in range(4):
                batch = _lines(5 * k, 5)
                inserted = await w.write(run_id, name, batch)
                assert inserted == sum(1 for e in batch if e.type == "result")
                # write() returned: the batch is committed, as a fresh read of the store says
                assert store.last_seq(run_id, name) == batch[-1].seq

        await asyncio.gather(*(host(h) for h in HOSTS))
        await w.close()
        return w

    try:
        w = asyncio.run(main())
    finally:
        thread.close()
    assert w.stats.batches == 4 * len(HOSTS) and w.stats.max_batches_per_transaction > 1
    assert w.stats.transactions < w.stats.batches
    detail = store.get_run(run_id)
    assert {(h.last_seq, h.results, h.errors) for h in detail.host_runs} == {(19, 19, 0)}
    rows = store.results(run_id, host="n007", limit=100).items
    assert [r.seq for r in rows] == list(range(1, 20))


def test_a_bad_batch_fails_its_host_and_stores_the_others(store: Store) -> None:
    run_id = _run(store, ["a", "b", "c"])
    thread = StoreWriter(store)

    async def main() -> list[int | BaseException]:
        w = IngestWriter(lambda b: thread.call(store.ingest_many, b))
        got = await asyncio.gather(
            w.write(run_id, "a", _lines(0, 3)), w.write(run_id, "b", _lines(7, 1)), w.write(run_id, "c", _lines(0, 2)),
            w.write(run_id, "nobody", _lines(0, 1)), return_exceptions=True,
        )  # fmt: skip
        await w.close()
        return got

    try:
        got = asyncio.run(main())
    finally:
        thread.close()
    assert got[0] == 2 and got[2] == 1
    assert isinstance(got[1], ValueError) and "position 7 follows -1" in str(got[1])
    assert "no host 'nobody'" in str(got[3])
    assert {h.host: h.last_seq for h in store.get_run(run_id).host_runs} == {"a": 2, "b": -1, "c": 1}


def test_ctrl_c_drains_the_queue_into_the_store(store: Store) -> None:
    """Follow loops cancelled while their batches wait behind a slow transaction: drain() commits them all."""
    run_id = _run(store, HOSTS[:10])
    thread = StoreWriter(store)

    async def main() -> None:
        gate = asyncio.Event()

        async def slow(b: list[Batch]) -> list[int]:
            await gate.wait()  # the store is busy (e.g. a checkpoint) while Ctrl-C arrives
            return await thread.call(store.ingest_many, b)

        w = IngestWriter(slow)
        tasks = [asyncio.create_task(w.write(run_id, h, _lines(0, 6))) for h in HOSTS[:10]]
        await asyncio.sleep(0.05)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert store.results(run_id).total == 0  # nothing committed yet
        gate.set()
        await asyncio.wait_for(w.drain(), 60)
        await w.close()

    try:
        asyncio.run(main())
    finally:
        thread.close()
    assert store.results(run_id, limit=100).total == 50
    assert {h.last_seq for h in store.get_run(run_id).host_runs} == {5}


@pytest.mark.parametrize("n", [1, 3])
def test_a_single_write_is_one_transaction(store: Store, n: int) -> None:
    run_id = _run(store, ["a"])
    thread = StoreWriter(store)

    async def main() -> IngestWriter:
        w = IngestWriter(lambda b: thread.call(store.ingest_many, b))
        for k in range(n):
            await w.write(run_id, "a", _lines(2 * k, 2))
        await w.close()
        return w

    try:
        w = asyncio.run(main())
    finally:
        thread.close()
    assert (w.stats.transactions, w.stats.batches) == (n, n)
    assert store.last_seq(run_id, "a") == 2 * n - 1
