"""``store_writer.IngestWriter``'s queue logic with a recording ``write_many`` (the real store: see
tests/integration/test_store_writer.py): batching across hosts, order, back-pressure, errors, drain on cancel."""

from __future__ import annotations

import asyncio

import pytest

from orchestrator.protocol import Event
from orchestrator.store_writer import Batch, IngestWriter


def _evs(host_start: int, n: int) -> list[Event]:
    return [Event(seq=host_start + i, type="log", data={}) for i in range(n)]


class Recorder:
    """A ``write_many`` that records each call's batches; ``gate`` (when set) holds every call until opened;
    ``bad`` hosts make any call holding one of their batches raise."""

    def __init__(self, *, gated: bool = False, bad: frozenset[str] = frozenset()) -> None:
        self.calls: list[list[tuple[str, list[int]]]] = []
        self.gate = asyncio.Event()
        if not gated:
            self.gate.set()
        self.bad = bad
        self.entered = asyncio.Event()

    async def __call__(self, batches: list[Batch]) -> list[int]:
        self.entered.set()
        await self.gate.wait()
        if any(h in self.bad for _, h, _ in batches):
            raise ValueError(f"bad host in {[h for _, h, _ in batches]}")
        self.calls.append([(h, [e.seq for e in evs]) for _, h, evs in batches])
        return [len(evs) for _, _, evs in batches]


def test_batches_of_many_hosts_share_transactions_and_keep_each_hosts_order() -> None:
    async def main() -> Recorder:
        rec = Recorder()
        w = IngestWriter(rec, batch_max=100)

        async def host(name: str) -> None:
            for k in range(5):
                assert await w.write("r", name, _evs(3 * k, 3)) == 3

        await asyncio.gather(*(host(f"h{i}") for i in range(20)))
        await w.close()
        assert w.stats.batches == 100 and w.stats.events == 300
        assert w.stats.transactions < 100 and w.stats.max_batches_per_transaction > 1
        assert w.stats.max_events_per_transaction <= 100
        return rec

    rec = asyncio.run(main())
    for i in range(20):  # every host's lines, in order, each exactly once
        seqs = [s for call in rec.calls for h, ss in call if h == f"h{i}" for s in ss]
        assert seqs == list(range(15))


def test_a_full_queue_holds_writers_back_until_the_store_catches_up() -> None:
    async def main() -> None:
        rec = Recorder(gated=True)
        w = IngestWriter(rec, batch_max=4, queue_max=6)
        first = asyncio.create_task(w.write("r", "a", _evs(0, 4)))
        await rec.entered.wait()  # the writer took a's batch and is stuck in the store
        queued = [asyncio.create_task(w.write("r", f"q{i}", _evs(0, 3))) for i in range(2)]
        blocked = asyncio.create_task(w.write("r", "late", _evs(0, 1)))
        for _ in range(20):
            await asyncio.sleep(0)
        assert w.queued == 6 and not blocked.done()  # 6 of 6 events waiting: 'late' is held back
        assert w.stats.max_queued == 6
        rec.gate.set()
        assert await asyncio.gather(first, *queued, blocked) == [4, 3, 3, 1]
        assert w.queued == 0
        await w.close()

    asyncio.run(main())


def test_a_batch_larger_than_the_queue_goes_alone_when_the_queue_is_empty() -> None:
    async def main() -> None:
        rec = Recorder()
        w = IngestWriter(rec, batch_max=2, queue_max=3)
        assert await w.write("r", "a", _evs(0, 10)) == 10
        await w.close()
        assert rec.calls == [[("a", list(range(10)))]]

    asyncio.run(main())


def test_a_failing_batch_fails_only_its_host() -> None:
    async def main() -> None:
        rec = Recorder(bad=frozenset({"bad"}))
        w = IngestWriter(rec)
        got = await asyncio.gather(
            w.write("r", "a", _evs(0, 2)), w.write("r", "bad", _evs(0, 1)), w.write("r", "b", _evs(0, 3)),
            return_exceptions=True,
        )  # fmt: skip
        assert got[0] == 2 and got[2] == 3
        assert isinstance(got[1], ValueError) and "bad" in str(got[1])
        assert rec.calls == [[("a", [0, 1])], [("b", [0, 1, 2])]]  # written again alone, in order
        assert w.stats.retried_alone == 3
        await w.close()

    asyncio.run(main())


def test_cancelled_writers_batches_are_written_by_drain() -> None:
    async def main() -> None:
        rec = Recorder(gated=True)
        w = IngestWriter(rec)
        tasks = [asyncio.create_task(w.write("r", f"h{i}", _evs(0, 2))) for i in range(3)]
        await rec.entered.wait()
        for t in tasks:  # Ctrl-C: the follow loops are cancelled while their batches wait for the store
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert all(t.cancelled() for t in tasks) and rec.calls == []
        drained = asyncio.create_task(w.drain())
        await asyncio.sleep(0)
        assert not drained.done()  # drain waits for the store
        rec.gate.set()
        await drained
        assert sorted(h for call in rec.calls for h, _ in call) == ["h0", "h1", "h2"]
        await w.close()

    asyncio.run(main())


def test_empty_writes_drain_and_close_need_no_task() -> None:
    async def main() -> None:
        rec = Recorder()
        w = IngestWriter(rec)
        assert await w.write("r", "a", []) == 0
        await w.drain()
        await w.close()  # never started
        assert rec.calls == []
        assert await w.write("r", "a", _evs(0, 1)) == 1  # starts again after a close
        await w.close()

    asyncio.run(main())
    with pytest.raises(ValueError, match="at least 1"):
        IngestWriter(Recorder(), batch_max=0)
