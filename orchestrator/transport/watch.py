"""Reading a streaming command's stdout while watching that it lives (both transports use it).

:class:`StreamWatch` reads stderr all along (feeding :class:`~orchestrator.transport.liveness.StderrTail`, so a
chatty command can never block on a full stderr pipe, and heartbeats are counted, not shown) and hands out stdout
chunks. Each wait for a chunk ends in one of three ways: a chunk (``b""`` at the end); ``CommandTimeout`` when
``idle_timeout_s`` passed with no chunk; :class:`Silent` when ``silent_s`` passed with neither a chunk nor a
heartbeat, once the command has shown it beats (a first chunk or heartbeat arms the check: before that, a
command's start-up — Python importing, a lease wait — has its own deadlines). The caller kills the command.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence

from orchestrator.errors import CommandSilent, command_shown
from orchestrator.transport.liveness import Liveness, StderrTail

ReadChunk = Callable[[], Awaitable[bytes]]


class Silent(Exception):  # noqa: N818 - a verdict the transport turns into CommandSilent
    """The command said nothing on stdout and sent no heartbeat for ``silent_s`` seconds; ``pid`` from them."""

    def __init__(self, silent_s: float, pid: int | None) -> None:
        super().__init__(f"silent for {silent_s:g} s")
        self.silent_s = silent_s
        self.pid = pid


def silent_error(host: str, argv: Sequence[str], silent_s: float, pid: int | None) -> CommandSilent:
    """The error for a command that went silent (``pid``: its pid on the host, from its heartbeats), which
    callers treat as a dropped connection (the runner kills it and follows the spool again)."""
    shown = command_shown(argv)
    who = f" (pid {pid})" if pid is not None else ""
    return CommandSilent(
        host,
        f"`{shown}`{who} said nothing for {silent_s:g} s, not even its heartbeat: stopped or wedged on the host",
        "check the host for stopped processes (ps -o stat: T); raise ORCH_FOLLOWER_SILENT_S on a host that "
        "pauses for that long",
        silent_s=silent_s,
        pid=pid,
    )


class IdleTimeout(Exception):  # noqa: N818 - the transport raises its CommandTimeout
    pass


class StreamWatch:
    def __init__(self, read_stderr: ReadChunk, *, silent_s: float | None, idle_timeout_s: float | None) -> None:
        self.silent_s = silent_s
        self.idle_timeout_s = idle_timeout_s
        self.tail = StderrTail()
        self.live = Liveness(time.monotonic())
        self.armed = False
        self._err_task = asyncio.ensure_future(self._read_stderr(read_stderr))

    async def _read_stderr(self, read: ReadChunk) -> None:
        while True:
            try:
                chunk = await read()
            except Exception:  # noqa: BLE001 - the channel went away: stdout's reader says how
                return
            if not chunk:
                return
            if self.tail.feed(chunk):
                self.live.heard(time.monotonic())
                self.armed = True

    async def next_chunk(self, read_stdout: ReadChunk) -> bytes:
        """The next stdout chunk (``b""`` at its end). Raises IdleTimeout, Silent, or what the read raised."""
        begun = time.monotonic()
        self.live.heard(begun)  # time spent away from reading (a consumer that blocked) does not count
        task = asyncio.ensure_future(read_stdout())
        try:
            while True:
                now = time.monotonic()
                waits = []
                if self.idle_timeout_s is not None:
                    waits.append(max(0.0, begun + self.idle_timeout_s - now))
                if self.silent_s is not None:
                    # unarmed: look again after a limit's time (a heartbeat arriving meanwhile arms the check)
                    waits.append(self.live.remaining(self.silent_s, now) if self.armed else self.silent_s)
                done, _ = await asyncio.wait({task}, timeout=min(waits) if waits else None)
                if not done:
                    # A loop that was busy elsewhere may hold unread heartbeats: let its readers run first.
                    for _ in range(3):
                        await asyncio.sleep(0)
                if task.done():
                    chunk = task.result()
                    self.live.heard(time.monotonic())
                    self.armed = True
                    return chunk
                now = time.monotonic()
                if self.idle_timeout_s is not None and now - begun >= self.idle_timeout_s:
                    raise IdleTimeout()
                if self.armed and self.silent_s is not None and self.live.silent_for(now) >= self.silent_s:
                    raise Silent(self.silent_s, self.tail.pid)
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task

    async def stderr_text(self, wait_s: float = 2.0) -> str:
        """What the command wrote on stderr besides heartbeats, once stderr ended (waiting ``wait_s`` s at most)."""
        with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._err_task), wait_s)
        return self.tail.text()

    async def close(self) -> None:
        if not self._err_task.done():
            self._err_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._err_task
