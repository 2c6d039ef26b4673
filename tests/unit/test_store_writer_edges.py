"""``IngestWriter``'s bounds and error paths at their edges (the mutation run of store_writer.py, docs/testing.md,
found each unchecked by test_store_writer.py): the smallest batch and queue, a batch filling a transaction exactly,
a batch failing alone, the count of batches written again alone."""

from __future__ import annotations

import asyncio

import pytest

from orchestrator.store_writer import IngestWriter
from tests.unit.test_store_writer import Recorder, _evs


@pytest.mark.parametrize(("batch_max", "queue_max"), [(0, 5), (5, 0), (-1, -1)])
def test_a_writer_needs_room_for_one_event(batch_max: int, queue_max: int) -> None:
    with pytest.raises(ValueError) as err:
        IngestWriter(Recorder(), batch_max=batch_max, queue_max=queue_max)
    assert str(err.value) == "batch_max and queue_max must be at least 1"


def test_one_event_per_transaction_and_in_the_queue_works() -> None:
    async def main() -> Recorder:
        rec = Recorder()
        w = IngestWriter(rec, batch_max=1, queue_max=1)
        assert await asyncio.gather(w.write("r", "a", _evs(0, 1)), w.write("r", "b", _evs(0, 1))) == [1, 1]
        await w.close()
        assert w.stats.transactions == 2 and w.stats.max_events_per_transaction == 1
        return rec

    assert asyncio.run(main()).calls == [[("a", [0])], [("b", [0])]]


def test_batches_filling_a_transaction_exactly_go_together() -> None:
    async def main() -> Recorder:
        rec = Recorder(gated=True)
        w = IngestWriter(rec, batch_max=4)
        first = asyncio.ensure_future(w.write("r", "a", _evs(0, 1)))
        await rec.entered.wait()  # the first transaction is being written: the next batches queue up
        rest = asyncio.gather(
            w.write("r", "b", _evs(0, 2)), w.write("r", "c", _evs(0, 2)), w.write("r", "d", _evs(0, 1))
        )
        await asyncio.sleep(0)
        rec.gate.set()
        assert await first == 1 and await rest == [2, 2, 1]
        await w.close()
        return rec

    calls = asyncio.run(main()).calls
    assert calls == [[("a", [0])], [("b", [0, 1]), ("c", [0, 1])], [("d", [0])]]


def test_a_batch_failing_alone_gets_its_own_error() -> None:
    async def main() -> None:
        rec = Recorder(bad=frozenset({"x"}))
        w = IngestWriter(rec)
        with pytest.raises(ValueError) as err:
            await w.write("r", "x", _evs(0, 2))
        assert str(err.value) == "bad host in ['x']"
        assert w.stats.retried_alone == 0
        assert await w.write("r", "a", _evs(0, 1)) == 1  # the writer goes on
        await w.close()

    asyncio.run(main())


def test_batches_written_again_alone_are_counted_over_transactions() -> None:
    async def main() -> None:
        rec = Recorder(gated=True, bad=frozenset({"x"}))
        w = IngestWriter(rec)
        for round_ in range(2):
            rec.gate.clear()
            rec.entered.clear()
            lead = asyncio.ensure_future(w.write("r", "lead", _evs(round_, 1)))
            await rec.entered.wait()
            pair = asyncio.gather(w.write("r", "a", _evs(round_, 1)), w.write("r", "x", _evs(round_, 1)),
                                  return_exceptions=True)  # fmt: skip
            await asyncio.sleep(0)
            rec.gate.set()
            assert await lead == 1
            a, x = await pair
            assert a == 1 and isinstance(x, ValueError)
        assert w.stats.retried_alone == 4  # 2 batches, twice
        await w.close()

    asyncio.run(main())
