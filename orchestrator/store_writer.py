"""One store writer for every host's events: batches from all hosts' follow loops, written in transactions across
hosts.

Each host's follow loop (``runner._HostRun.follow``) drains the events its reader has parsed and hands them to
:meth:`IngestWriter.write`, which returns once they are committed. One task takes the batches queued by all
hosts, in arrival order, and writes up to ``batch_max`` events of them in one ``Store.ingest_many`` call (one
transaction: one commit, one SELECT of the host runs, one INSERT of the result rows) through the runner's store
thread. While it commits, the next hosts' batches queue up and go together in the next transaction: with a
thousand hosts each sending a line now and then, the store does a few transactions a second instead of one per
host per line, and keeps up (bench/ingest_fanin.py prints the queue).

Guarantees:

- nothing is reported stored before it is committed: ``write`` returns (and the follow loop looks at the events,
  e.g. its ``done``) only after the transaction holding them committed;
- a host's events are committed in order: a follow loop has one batch in flight, batches leave the queue in the
  order they came, and ``ingest_many`` applies a call's batches in order;
- bounded: at most ``queue_max`` events wait here (a batch larger than that waits until the queue is empty);
  a follow loop that finds it full waits, its reader's own bounded queue fills, and the reader stops reading
  the host's stream (back-pressure up to the SSH channel);
- a failed transaction fails no innocent host: when a call of several batches raises, each batch is written
  again alone, and only the batches that fail alone get the error (a gap in positions, an unknown host run);
- Ctrl-C: a follow loop cancelled while waiting leaves its batch queued; :meth:`drain` (the runner's cancel
  path, before it marks the run cancelled) returns when everything queued is committed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from orchestrator.protocol import Event

Batch = tuple[str, str, Sequence[Event]]  # (run_id, host, events)
WriteMany = Callable[[list[Batch]], Awaitable[list[int]]]  # Store.ingest_many on the store thread

BATCH_MAX = 2_000  # events per transaction (all hosts together); a follow loop's own batches are no larger
QUEUE_MAX = 10_000  # events waiting for the store, all hosts together; beyond, follow loops wait


@dataclass
class _Item:
    run_id: str
    host: str
    events: Sequence[Event]
    done: asyncio.Future[int]


@dataclass
class WriterStats:
    """What the writer did: ``transactions`` (store calls), ``events`` and ``batches`` committed, the largest
    number of events and of hosts' batches one transaction held, and the deepest the queue got (events)."""

    transactions: int = 0
    events: int = 0
    batches: int = 0
    max_events_per_transaction: int = 0
    max_batches_per_transaction: int = 0
    max_queued: int = 0  # retried_alone: batches written again alone after their shared transaction failed
    retried_alone: int = 0


class IngestWriter:
    """The single writer of events to the store for a run (or several: batches carry their run id).

    ``write_many``: writes a list of ``(run_id, host, events)`` batches in one transaction and returns the result
    rows inserted per batch — the runner passes ``Store.ingest_many`` run on its store thread. Create it
    anywhere; its task starts with the first :meth:`write` in the running event loop.
    """

    def __init__(self, write_many: WriteMany, *, batch_max: int = BATCH_MAX, queue_max: int = QUEUE_MAX) -> None:
        if batch_max < 1 or queue_max < 1:
            raise ValueError("batch_max and queue_max must be at least 1")
        self._write_many = write_many
        self.batch_max = batch_max
        self.queue_max = queue_max
        self.stats = WriterStats()
        self._items: deque[_Item] = deque()
        self._queued = 0  # events in _items
        self._busy = False  # a transaction is being written
        self._task: asyncio.Task[None] | None = None
        self._changed: asyncio.Condition | None = None

    @property
    def queued(self) -> int:
        """Events waiting for the store (not counting the transaction being written)."""
        return self._queued

    async def write(self, run_id: str, host: str, events: Sequence[Event]) -> int:
        """Queue one host's batch and wait until it is committed; returns the result rows it newly inserted.
        Raises what ``write_many`` raised for this batch written alone (StoreError, ValueError...). Waits first
        while the queue holds ``queue_max`` events. Cancelling the caller leaves a queued batch to be written."""
        if not events:
            return 0
        changed = self._start()
        loop = asyncio.get_running_loop()
        item = _Item(run_id, host, events, loop.create_future())
        async with changed:
            await changed.wait_for(lambda: self._queued == 0 or self._queued + len(events) <= self.queue_max)
            self._items.append(item)
            self._queued += len(events)
            self.stats.max_queued = max(self.stats.max_queued, self._queued)
            changed.notify_all()
        return await asyncio.shield(item.done)  # a cancelled caller does not cancel the write

    async def drain(self) -> None:
        """Return when everything queued so far is committed (or has failed)."""
        if self._task is None or self._changed is None:
            return
        changed = self._changed
        async with changed:
            await changed.wait_for(self._settled)

    def _settled(self) -> bool:
        return (not self._items and not self._busy) or self._task is None or self._task.done()

    async def close(self) -> None:
        """Drain, then stop the task."""
        await self.drain()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def _start(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(self._changed), name="orch-ingest-writer")
        return self._changed

    async def _run(self, changed: asyncio.Condition) -> None:
        take: list[_Item] = []
        try:
            while True:
                async with changed:
                    await changed.wait_for(lambda: bool(self._items))
                    take, n = [], 0
                    while self._items and (not take or n + len(self._items[0].events) <= self.batch_max):
                        item = self._items.popleft()
                        take.append(item)
                        n += len(item.events)
                    self._queued -= n
                    self._busy = True
                    changed.notify_all()  # room in the queue
                await self._commit(take)
                st = self.stats
                st.transactions += 1
                st.events += n
                st.batches += len(take)
                st.max_events_per_transaction = max(st.max_events_per_transaction, n)
                st.max_batches_per_transaction = max(st.max_batches_per_transaction, len(take))
                take = []
                async with changed:
                    self._busy = False
                    changed.notify_all()
        finally:  # stopped (close, or the loop shutting down): nobody waits forever on a batch never written
            for item in [*take, *self._items]:
                if not item.done.done():
                    item.done.set_exception(RuntimeError("the store writer stopped before this batch was written"))
            self._items.clear()
            self._queued = 0
            self._busy = False
            with contextlib.suppress(BaseException):  # wake drain(): it sees the task done
                async with changed:
                    changed.notify_all()

    async def _commit(self, take: list[_Item]) -> None:
        try:
            counts = await self._write_many([(i.run_id, i.host, i.events) for i in take])
        except Exception as exc:  # noqa: BLE001 - handed to the waiting follow loops
            if len(take) == 1:
                _settle(take[0], exc=exc)
                return
            self.stats.retried_alone += len(take)
            for item in take:  # in order: a host's later batch never goes before its earlier one
                try:
                    (count,) = await self._write_many([(item.run_id, item.host, item.events)])
                except Exception as alone:  # noqa: BLE001
                    _settle(item, exc=alone)
                else:
                    _settle(item, count=count)
            return
        for item, count in zip(take, counts, strict=True):
            _settle(item, count=count)


def _settle(item: _Item, *, count: int = 0, exc: BaseException | None = None) -> None:
    if item.done.done():
        return
    if exc is not None:
        item.done.set_exception(exc)
    else:
        item.done.set_result(count)
