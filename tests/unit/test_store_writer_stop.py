"""``IngestWriter`` stopped with batches in flight or queued (the event loop shutting down cancels its task), and
``drain``/``close`` never hanging: the survivors and timeouts of store_writer.py's mutation run (docs/testing.md).
Every wait here is bounded (``WAIT`` seconds, far above what the work needs on a loaded machine), so a writer that
would leave a waiter hanging fails the test instead."""

from __future__ import annotations

import asyncio

import pytest

from orchestrator.store_writer import Batch, IngestWriter
from tests.unit.test_store_writer import Recorder, _evs

WAIT = 30.0  # seconds; generous: nothing here sleeps, a hang is a failure, not a slow pass
STOPPED = "the store writer stopped before this batch was written"


def _writer_task() -> asyncio.Task[object]:
    """The writer's task, found by its name (what a task dump or a debugger shows)."""
    (task,) = [t for t in asyncio.all_tasks() if t.get_name() == "orch-ingest-writer"]
    return task


def test_the_writer_task_is_named_and_only_one_serves_all_hosts() -> None:
    async def main() -> None:
        rec = Recorder()
        w = IngestWriter(rec)
        assert await asyncio.wait_for(asyncio.gather(w.write("r", "a", _evs(0, 1)), w.write("r", "b", _evs(0, 2))),
                                      WAIT) == [1, 2]  # fmt: skip
        task = _writer_task()
        assert not task.done()
        await asyncio.wait_for(w.close(), WAIT)
        assert task.cancelled()
        assert [t for t in asyncio.all_tasks() if t.get_name() == "orch-ingest-writer"] == []

    asyncio.run(main())


def test_a_stopped_writer_fails_its_in_flight_and_queued_batches_and_resets() -> None:
    async def main() -> None:
        rec = Recorder(gated=True)
        w = IngestWriter(rec, batch_max=2)
        in_flight = asyncio.ensure_future(w.write("r", "a", _evs(0, 2)))
        await asyncio.wait_for(rec.entered.wait(), WAIT)  # a's batch is in the store, the next ones queue
        queued = [asyncio.ensure_future(w.write("r", h, _evs(0, 2))) for h in ("b", "c")]
        for _ in range(20):
            await asyncio.sleep(0)
        assert w.queued == 4
        _writer_task().cancel()  # the loop shutting down
        got = await asyncio.wait_for(asyncio.gather(in_flight, *queued, return_exceptions=True), WAIT)
        for exc in got:
            assert type(exc) is RuntimeError and str(exc) == STOPPED
        assert w.queued == 0 and rec.calls == []
        await asyncio.wait_for(w.drain(), WAIT)  # returns: nothing is left to write
        await asyncio.wait_for(w.close(), WAIT)
        rec.gate.set()
        assert await asyncio.wait_for(w.write("r", "d", _evs(0, 1)), WAIT) == 1  # a new task after the close
        await asyncio.wait_for(w.close(), WAIT)
        assert rec.calls == [[("d", [0])]]

    asyncio.run(main())


def test_drain_waits_for_the_transaction_being_written_then_returns() -> None:
    async def main() -> None:
        rec = Recorder(gated=True)
        w = IngestWriter(rec)
        first = asyncio.ensure_future(w.write("r", "a", _evs(0, 3)))
        await asyncio.wait_for(rec.entered.wait(), WAIT)
        assert w.queued == 0  # taken: the queue is empty, the transaction is being written
        drained = asyncio.ensure_future(w.drain())
        for _ in range(20):
            await asyncio.sleep(0)
        assert not drained.done()  # busy: drain waits for the commit, not only for an empty queue
        rec.gate.set()
        await asyncio.wait_for(drained, WAIT)
        assert first.done() and first.result() == 3 and rec.calls == [[("a", [0, 1, 2])]]
        await asyncio.wait_for(w.drain(), WAIT)  # idle: returns at once
        await asyncio.wait_for(w.close(), WAIT)
        await asyncio.wait_for(w.drain(), WAIT)  # closed: returns at once
        assert w.stats.transactions == 1 and w.stats.events == 3 and w.stats.batches == 1

    asyncio.run(main())


def test_a_writer_whose_store_call_is_cancelled_fails_the_batch_and_drain_returns() -> None:
    class Cancelling(Recorder):
        async def __call__(self, batches: list[Batch]) -> list[int]:
            raise asyncio.CancelledError  # the store thread's future cancelled under the writer

    async def main() -> None:
        w = IngestWriter(Cancelling())
        with pytest.raises(RuntimeError) as err:
            await asyncio.wait_for(w.write("r", "a", _evs(0, 1)), WAIT)
        assert str(err.value) == STOPPED
        assert w.queued == 0
        await asyncio.wait_for(w.drain(), WAIT)
        await asyncio.wait_for(w.close(), WAIT)

    asyncio.run(main())


def test_a_batch_larger_than_the_queue_waits_only_for_the_queue_to_empty() -> None:
    async def main() -> None:
        rec = Recorder(gated=True)
        w = IngestWriter(rec, batch_max=10, queue_max=3)
        first = asyncio.ensure_future(w.write("r", "a", _evs(0, 2)))
        await asyncio.wait_for(rec.entered.wait(), WAIT)  # a is in the store; the queue is empty
        small = asyncio.ensure_future(w.write("r", "b", _evs(0, 1)))
        for _ in range(20):
            await asyncio.sleep(0)
        assert w.queued == 1
        big = asyncio.ensure_future(w.write("r", "c", _evs(0, 5)))  # 1 + 5 > 3: waits, though one event is queued
        for _ in range(20):
            await asyncio.sleep(0)
        assert w.queued == 1 and not big.done()
        rec.gate.set()
        assert await asyncio.wait_for(asyncio.gather(first, small, big), WAIT) == [2, 1, 5]
        await asyncio.wait_for(w.close(), WAIT)
        assert rec.calls == [[("a", [0, 1])], [("b", [0])], [("c", [0, 1, 2, 3, 4])]]

    asyncio.run(main())


def test_a_batch_larger_than_an_empty_queue_is_written_without_waiting_forever() -> None:
    async def main() -> None:
        rec = Recorder()
        w = IngestWriter(rec, batch_max=4, queue_max=3)
        assert await asyncio.wait_for(w.write("r", "a", _evs(0, 7)), WAIT) == 7
        await asyncio.wait_for(w.close(), WAIT)
        assert rec.calls == [[("a", list(range(7)))]] and w.stats.max_queued == 7

    asyncio.run(main())


def test_a_store_answering_fewer_counts_than_batches_leaves_nobody_waiting() -> None:
    class Short(Recorder):
        async def __call__(self, batches: list[Batch]) -> list[int]:
            return (await super().__call__(batches))[:-1] if len(batches) > 1 else await super().__call__(batches)

    async def main() -> None:
        rec = Short(gated=True)
        w = IngestWriter(rec)
        lead = asyncio.ensure_future(w.write("r", "lead", _evs(0, 1)))
        await asyncio.wait_for(rec.entered.wait(), WAIT)
        pair = asyncio.gather(w.write("r", "a", _evs(0, 2)), w.write("r", "b", _evs(0, 1)), return_exceptions=True)
        for _ in range(20):
            await asyncio.sleep(0)
        rec.gate.set()
        assert await asyncio.wait_for(lead, WAIT) == 1
        a, b = await asyncio.wait_for(pair, WAIT)  # a count for a, none for b: b fails instead of waiting forever
        assert a == 2 and type(b) is RuntimeError and str(b) == STOPPED
        with pytest.raises(ValueError, match="zip"):  # close hands on the writer's failure
            await asyncio.wait_for(w.close(), WAIT)

    asyncio.run(main())


def test_a_fresh_writer_has_nothing_queued() -> None:
    w = IngestWriter(Recorder())
    assert w.queued == 0 and w.stats.max_queued == 0
