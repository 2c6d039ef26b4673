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

``agent cancel`` uses :func:`kill_session` too, after the worker's SIGTERM grace.

A program that calls ``setsid`` itself (a daemon, ``setsid sleep``) leaves the session. Such processes are followed
by an **environment cookie** (the technique of Jenkins' ProcessTreeKiller): the worker makes one per run and host
(:func:`make_cookie`, ``<run_id>/<host>/<random>``, kept in the run directory's ``cookie`` file for ``agent
cancel``) and puts it in every command's environment as :data:`COOKIE_ENV`; the worker after each command, the
guardian after the worker's death and ``agent cancel`` then kill every process of the same uid whose
``/proc/PID/environ`` holds exactly that cookie (:func:`kill_cookie`), scanning again until none is left. A
process that removes the variable from its environment (or execs with an empty one) is not followed.
"""

from __future__ import annotations

import ctypes
import os
import re
import secrets
import select
import signal
import time
from collections.abc import Callable
from typing import Any

from .runs import session_members, valid_pid

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
KILL_DEADLINE_S = 30.0
COOKIE_ENV = "ORCH_RUN_COOKIE"
COOKIE_FILE = "cookie"
_COOKIE_RANDOM_RE = re.compile(r"^[0-9a-f]{32}$")

_libc: Any = None
_keep: list = []  # the worker's end of the guardian's pipe, held open for the worker's life
_cookie: list[str] = []  # this worker's cookie, once made (run): the command bench puts it in each command's env


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
        kill_cookie(current_cookie(), exclude=(os.getpid(),))
    finally:
        os._exit(0)



def make_cookie(run_id: str, host: str) -> str:
    """A cookie unique to this run, host and worker: ``<run_id>/<host>/<32 hex digits>``."""
    return f"{run_id}/{host}/{secrets.token_hex(16)}"


def valid_cookie(cookie: str, run_id: str, host: str) -> bool:
    """True when ``cookie`` is one :func:`make_cookie` made for ``run_id`` and ``host``."""
    prefix = f"{run_id}/{host}/"
    return cookie.startswith(prefix) and bool(_COOKIE_RANDOM_RE.match(cookie[len(prefix):]))


def set_cookie(cookie: str) -> None:
    """Make ``cookie`` the one :func:`current_cookie` returns (the worker, before its first command)."""
    _cookie[:] = [cookie]


def current_cookie() -> str | None:
    return _cookie[0] if _cookie else None


def write_cookie(run_dir: str, cookie: str) -> None:
    """Write ``cookie`` to ``<run_dir>/cookie`` (0600, a symbolic link there is not followed)."""
    fd = os.open(os.path.join(run_dir, COOKIE_FILE), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, cookie.encode() + b"\n")
    finally:
        os.close(fd)


def read_cookie(run_dir: str, run_id: str, host: str) -> str | None:
    """The cookie the run's worker wrote in ``run_dir``, or None: no file (a worker of an older agent), a link
    (never followed), unreadable, or not a cookie of ``run_id`` and ``host`` (:func:`valid_cookie`)."""
    try:
        fd = os.open(os.path.join(run_dir, COOKIE_FILE), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    cookie = raw.decode("utf-8", "replace").strip()
    return cookie if valid_cookie(cookie, run_id, host) else None


def _has_cookie(pid: int, needle: bytes) -> bool:
    """True when process ``pid`` is this uid's and its environment holds exactly ``needle`` (``NAME=value``).
    False for a process gone, a zombie (an empty environ), another uid's, or an environ that cannot be read."""
    try:
        if os.stat(f"/proc/{pid}").st_uid != os.getuid():
            return False
        with open(f"/proc/{pid}/environ", "rb") as f:
            env = f.read()
    except OSError:
        return False
    return needle in env.split(b"\0")


def cookie_members(cookie: str, exclude: tuple[int, ...] = ()) -> list[int]:
    """The pids of this uid's processes whose environment holds ``COOKIE_ENV=cookie`` exactly, leaving out pid 1,
    the caller and ``exclude``."""
    if not cookie:
        return []
    needle = f"{COOKIE_ENV}={cookie}".encode()
    me = os.getpid()
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    out = []
    for name in names:
        if not name.isdigit():
            continue
        pid = int(name)
        if pid <= 1 or pid == me or pid in exclude or not valid_pid(pid):
            continue
        if _has_cookie(pid, needle):
            out.append(pid)
    return out


def _signal_if_cookie(pid: int, needle: bytes, sig: int) -> None:
    """Send ``sig`` to ``pid`` only if it still holds the cookie. Through a pidfd where the kernel has them, so a
    pid recycled between the check and the signal is never signalled."""
    pidfd_open = getattr(os, "pidfd_open", None)
    send = getattr(signal, "pidfd_send_signal", None)
    fd = None
    if pidfd_open is not None and send is not None:
        try:
            fd = pidfd_open(pid)
        except ProcessLookupError:
            return
        except OSError:
            fd = None
    try:
        if not _has_cookie(pid, needle):
            return
        if fd is not None and send is not None:
            send(fd, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError, OSError):
        pass
    finally:
        if fd is not None:
            os.close(fd)


def kill_cookie(
    cookie: str | None, exclude: tuple[int, ...] = (), grace_s: float = 0.0, deadline_s: float = KILL_DEADLINE_S
) -> int:
    """Stop every process carrying ``cookie`` (:func:`cookie_members`): SIGTERM and up to ``grace_s`` for them to
    go when ``grace_s`` > 0, then SIGKILL, scanning again (a daemon may fork while it is killed) until none is left
    or ``deadline_s`` passes. Returns how many processes were seen."""
    if not cookie:
        return 0
    needle = f"{COOKIE_ENV}={cookie}".encode()
    seen: set[int] = set()
    start = time.monotonic()
    if grace_s > 0:
        pids = cookie_members(cookie, exclude)
        for pid in pids:
            seen.add(pid)
            _signal_if_cookie(pid, needle, signal.SIGTERM)
        while pids and time.monotonic() < start + grace_s:
            time.sleep(0.05)
            pids = cookie_members(cookie, exclude)
    deadline = time.monotonic() + deadline_s
    while True:
        pids = cookie_members(cookie, exclude)
        if not pids or time.monotonic() > deadline:
            return len(seen)
        for pid in pids:
            seen.add(pid)
            _signal_if_cookie(pid, needle, signal.SIGKILL)
        time.sleep(0.02)
