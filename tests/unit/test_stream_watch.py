"""``transport/watch.StreamWatch``'s rules, with in-memory streams in place of a process's pipes: when silence
counts against a command, and what its stderr text keeps. (The real pipes, sshd's and a subprocess's, are in
tests/integration/test_transport_silent.py.) No assertion here depends on how fast the machine is: each waits
for an outcome, never for a time to pass or not."""

from __future__ import annotations

import asyncio

import pytest

from orchestrator.transport.liveness import HEARTBEAT
from orchestrator.transport.watch import IdleTimeout, Silent, StreamWatch


class Pipe:
    """One stream: chunks put by the test, read as a process's pipe reads (``b""`` at its end) — a few loop
    iterations after the read began, as data on a real pipe arrives through the selector."""

    def __init__(self) -> None:
        self.q: asyncio.Queue[bytes] = asyncio.Queue()

    async def read(self) -> bytes:
        chunk = await self.q.get()
        for _ in range(10):
            await asyncio.sleep(0)
        return chunk


async def test_a_command_that_never_spoke_is_not_judged_silent() -> None:
    out, err = Pipe(), Pipe()
    watch = StreamWatch(err.read, silent_s=0.05, idle_timeout_s=None)
    try:
        task = asyncio.ensure_future(watch.next_chunk(out.read))
        await asyncio.sleep(0.5)  # ten limits: unarmed, it waits (a start-up has deadlines of its own)
        assert not task.done()
        out.q.put_nowait(b"first\n")
        assert await task == b"first\n"
    finally:
        await watch.close()


async def test_once_armed_silence_ends_it_naming_the_pid_of_its_heartbeats() -> None:
    out, err = Pipe(), Pipe()
    watch = StreamWatch(err.read, silent_s=0.2, idle_timeout_s=None)
    try:
        err.q.put_nowait(HEARTBEAT + b" pid=321\n")
        with pytest.raises(Silent) as info:
            await asyncio.wait_for(watch.next_chunk(out.read), 60)
        assert (info.value.pid, info.value.silent_s) == (321, 0.2)
    finally:
        await watch.close()


async def test_time_away_from_reading_does_not_count_as_silence() -> None:
    """A consumer that blocked (the store slow) left the command blocked on a full pipe: it is alive."""
    out, err = Pipe(), Pipe()
    watch = StreamWatch(err.read, silent_s=1.0, idle_timeout_s=None)
    try:
        out.q.put_nowait(b"one\n")
        assert await watch.next_chunk(out.read) == b"one\n"  # armed
        await asyncio.sleep(1.5)  # away for longer than the limit
        out.q.put_nowait(b"two\n")
        assert await watch.next_chunk(out.read) == b"two\n"
    finally:
        await watch.close()


async def test_idle_timeout_applies_armed_or_not() -> None:
    out, err = Pipe(), Pipe()
    watch = StreamWatch(err.read, silent_s=None, idle_timeout_s=0.1)
    try:
        with pytest.raises(IdleTimeout):
            await asyncio.wait_for(watch.next_chunk(out.read), 60)
    finally:
        await watch.close()


async def test_stderr_text_is_what_the_command_wrote_besides_heartbeats() -> None:
    out, err = Pipe(), Pipe()
    watch = StreamWatch(err.read, silent_s=30.0, idle_timeout_s=None)
    for chunk in (HEARTBEAT + b" pid=9\nwarn", b"ing\n" + HEARTBEAT + b"\n", b'{"error": "x"}\n', b""):
        err.q.put_nowait(chunk)
    out.q.put_nowait(b"")
    assert await watch.next_chunk(out.read) == b""
    assert await watch.stderr_text(wait_s=60) == 'warning\n{"error": "x"}\n'
    assert watch.tail.heartbeats == 2 and watch.tail.pid == 9
    await watch.close()
