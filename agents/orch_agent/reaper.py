"""Children die with the worker: nothing a run started outlives it.

The worker is a session leader (``start`` launches it with ``setsid``). Everything it starts stays in that
session: a ``command`` case's process gets its own process *group* (so a timeout kills the command and whatever
it forked, without killing the worker), never its own session. Two mechanisms then cover a worker that dies in
any way, SIGKILL and the OOM killer included:

- each command's first process gets ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` (Linux ``prctl(2)``): the kernel kills
  it when the worker thread that started it exits;
- a **guardian**, forked by the worker before its first case, in its own process group (so the ``agent cancel``
  signals sent to the worker's group do not reach it) and ignoring SIGTERM/SIGINT/SIGHUP. It waits for the worker
  to go (its pipe from the worker reaches EOF, or its parent pid changes) and then SIGKILLs every process group
  left in the worker's session (:func:`kill_session`) — the grandchildren that PDEATHSIG does not reach.

``agent cancel`` uses :func:`kill_session` too, after the worker's SIGTERM grace. A program that calls ``setsid``
itself (a daemon) leaves the session and is out of reach; that is the one thing this does not cover.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import time
from collections.abc import Callable
from typing import Any

from .runs import session_members, valid_pid

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
KILL_DEADLINE_S = 30.0

_libc: Any = None
_keep: list = []  # the worker's end of the guardian's pipe, held open for the worker's life


def _prctl() -> Any:
    global _libc
    if _libc is None:
        try:
            _libc = ctypes.CDLL(None, use_errno=True)
            _libc.prctl  # noqa: B018 - raises AttributeError where there is no prctl (not Linux)
        except (OSError, AttributeError):
            _libc = False
    return _libc.prctl if _libc else None


def child_setup() -> Callable[[], None]:
    """A ``preexec_fn`` for a command: own process group, SIGKILL when the worker dies, and SIGHUP back to its
    default action. Built in the parent (ctypes loads libc there, not between fork and exec).

    The worker ignores SIGHUP (its session's hangup is not a stop), and an ignored signal stays ignored across
    ``execve`` (``signal(7)``; Python's ``restore_signals`` resets only SIGPIPE, SIGXFZ and SIGXFSZ): a tool
    killed by SIGHUP was stored as a success, while every other fatal signal was named."""
    prctl = _prctl()
    parent = os.getpid()

    def setup() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        os.setpgid(0, 0)
        if prctl is not None:
            prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:  # the worker died between fork and prctl: follow it
            os.kill(os.getpid(), signal.SIGKILL)

    return setup


def kill_session(sid: int, exclude: tuple[int, ...] = (), deadline_s: float = KILL_DEADLINE_S) -> int:
    """SIGKILL every process group of session ``sid`` (leaving out the processes in ``exclude``) until none is
    left or ``deadline_s`` passes. Returns how many processes were seen and signalled."""
    seen: set[int] = set()
    if not valid_pid(sid):  # session 0 is the kernel's threads; killpg(0, ...) would be the caller's own group
        return 0
    deadline = time.monotonic() + deadline_s
    while True:
        members = session_members(sid, exclude)
        if not members or time.monotonic() > deadline:
            return len(seen)
        for pid, pgid in members:
            seen.add(pid)
            if not valid_pid(pid):
                continue
            try:
                if valid_pid(pgid) and pgid not in exclude and pgid != os.getpgid(0):
                    os.killpg(pgid, signal.SIGKILL)
                else:
                    os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, OSError):
                pass
        time.sleep(0.05)


def start_guardian(poll_s: float = 1.0) -> int | None:
    """Fork the guardian for the calling worker (a session leader); returns the guardian's pid, or None when
    fork failed or the caller leads no session (the guardian's end kills the session: never one that is not the
    worker's own) — the worker then runs without one: PDEATHSIG still covers each command's first process."""
    worker = os.getpid()
    sid = os.getsid(0)
    if sid != worker:  # not a session leader: its session is someone else's (the login's, a job step's)
        return None
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid:
        os.close(r)
        _keep.append(w)  # not inheritable: only the worker holds it, and its exit is the guardian's EOF
        return pid
    # The guardian. Never returns into the worker's code.
    try:
        os.close(w)
        os.setpgid(0, 0)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        os.closerange(3, r)
        os.closerange(r + 1, 1 << 16)
        while os.getppid() == worker:
            ready, _, _ = select.select([r], [], [], poll_s)
            if ready and not os.read(r, 64):
                break
        kill_session(sid, exclude=(os.getpid(),))
    finally:
        os._exit(0)

