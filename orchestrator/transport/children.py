"""Stopping a child process that asyncio started, without taking its exit status from asyncio.

``asyncio.subprocess.Process.kill()`` goes through ``subprocess.Popen.send_signal``, which first polls the child
(``waitpid(pid, WNOHANG)``, CPython bpo-38630). A child that has just exited — the agent's ``follow`` right after
it printed ``done``, when orch stops reading — is then reaped by that poll, behind the back of asyncio's child
watcher (a thread blocked in ``waitpid(pid, 0)`` in CPython 3.11's default ``ThreadedChildWatcher``); the
watcher gets ECHILD, logs ``Unknown child process pid N, will report returncode 255`` on stderr, and the process
reports 255 instead of its real exit status. :func:`kill` signals with ``os.kill`` and leaves the reaping to the
watcher alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal


def kill(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL ``proc`` unless asyncio already has its exit status; never reaps it (``await proc.wait()`` then
    gives the status the watcher read). The pid cannot name another process here: only the watcher reaps it,
    and the loop learns the status (``returncode`` set) in the same loop iteration's callbacks — a pid is not
    reissued by Linux before it wraps around ``pid_max``."""
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):  # exited and reaped by the watcher, not yet seen by the loop
        os.kill(proc.pid, signal.SIGKILL)
