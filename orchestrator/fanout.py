"""Bounded concurrency over hosts with a per-host deadline; a failed host is a value, not an exception."""

from __future__ import annotations

import asyncio
import time
import traceback
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from orchestrator.errors import HostError, OrchError
from orchestrator.inventory import Host

T = TypeVar("T")


@dataclass
class Outcome(Generic[T]):
    """One host's result: ``value`` when it worked, ``error`` (an OrchError) when it did not."""

    host: Host
    value: T | None
    error: OrchError | None
    elapsed_s: float

    @property
    def ok(self) -> bool:
        return self.error is None


async def fanout(
    hosts: Sequence[Host],
    fn: Callable[[Host], Awaitable[T]],
    *,
    concurrency: int = 64,
    deadline_s: float | None = None,
) -> list[Outcome[T]]:
    """Run ``fn(host)`` for every host, at most ``concurrency`` at once, each within ``deadline_s`` seconds.

    Returns one Outcome per host, in the order given. An OrchError becomes that host's ``error``; an
    unexpected exception becomes a HostError carrying the traceback's last line (it is a bug in orch: the
    full traceback is kept in ``error.__cause__``). Cancellation (Ctrl-C) propagates.
    """
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(host: Host) -> Outcome[T]:
        async with sem:
            t0 = time.monotonic()
            try:
                if deadline_s is None:
                    value = await fn(host)
                else:
                    value = await asyncio.wait_for(fn(host), deadline_s)
                return Outcome(host, value, None, time.monotonic() - t0)
            except (asyncio.TimeoutError, TimeoutError):
                err: OrchError = HostError(
                    host.name, f"did not finish within its {deadline_s:g} s deadline", "raise --timeout"
                )
                return Outcome(host, None, err, time.monotonic() - t0)
            except OrchError as exc:
                return Outcome(host, None, exc, time.monotonic() - t0)
            except Exception as exc:  # noqa: BLE001 - a bug must not cancel the other hosts
                last = traceback.format_exception_only(type(exc), exc)[-1].strip()
                bug = HostError(host.name, f"internal error: {last}", "this is a bug in orch; please report it")
                bug.__cause__ = exc
                return Outcome(host, None, bug, time.monotonic() - t0)

    return list(await asyncio.gather(*(one(h) for h in hosts)))
