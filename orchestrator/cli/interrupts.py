"""Ctrl-C for ``orch run``: the first cancels, a second is absorbed, a third stops waiting for the remote stops.

``asyncio.run`` alone cancels the main task on the first SIGINT and raises ``KeyboardInterrupt`` wherever the
interpreter happens to be on the second — in the middle of the cancel that stops the remote agents (the trial of
issue 10/21: a traceback from ``create_subprocess_exec``, "Task was destroyed but it is pending!", the agents never
stopped, the run left ``running``). A terminal's Ctrl-C pressed twice, and ``timeout -s INT`` (which signals the
child, then its whole process group), both send two. Here SIGINT is taken by the event loop
(``loop.add_signal_handler``: no exception is ever raised at a random point) and each one does what
``resume.interrupt_action`` says; once interrupted, SIGINT stays ignored until the process exits 130.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from orchestrator.resume import InterruptAction, interrupt_action

T = TypeVar("T")


def run_interruptible(
    main: Coroutine[Any, Any, T], *, abandon: Callable[[], None], said: Callable[[InterruptAction], None]
) -> T:
    """``asyncio.run(main)`` with orch's Ctrl-C: the first SIGINT cancels ``main``'s task (the runner stops the
    remote agents and stores the run cancelled before the cancellation ends it), the second is absorbed, the third
    and later call ``abandon`` (the runner stops waiting for remote stops). ``said`` is told each action (the CLI
    prints what is going on). Returns what ``main`` returns; raises ``KeyboardInterrupt`` once ``main`` ended by
    an interrupt's cancellation. Outside the main thread (no signals there) it is plain ``asyncio.run``."""
    if threading.current_thread() is not threading.main_thread():
        return asyncio.run(main)
    hits = 0

    async def guarded() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def on_sigint() -> None:
            nonlocal hits
            hits += 1
            action = interrupt_action(hits)
            if action == "cancel":
                task.cancel()
            elif action == "abandon":
                abandon()
            said(action)

        loop.add_signal_handler(signal.SIGINT, on_sigint)
        try:
            return await main
        finally:
            loop.remove_signal_handler(signal.SIGINT)  # back to Python's handler (KeyboardInterrupt) ...
            if hits:  # ... unless interrupted: the process exits 130 next, and the teardown is not cut short
                signal.signal(signal.SIGINT, signal.SIG_IGN)

    try:
        return asyncio.run(guarded())
    except asyncio.CancelledError:
        if hits:
            raise KeyboardInterrupt from None
        raise
