"""Process limits for fan-out to many hosts: the open-files limit (RLIMIT_NOFILE) raised to its hard maximum at
the start of a command, and a clear refusal when even the hard maximum is too low for the chosen concurrency.

Open files per host in flight (:data:`FDS_PER_HOST`): the SSH connection's socket, plus, while a host's
settings are resolved, an ``ssh -G`` child's stdout/stderr pipes, or a ProxyCommand/ProxyJump child's pipes for
the life of the connection — at most 4 at once. :data:`FDS_BASE` covers the rest of the process (see its
comment). The check counts the hosts actually in flight — min(concurrency, hosts selected) — so one host fits a
limit of 100 (a tester's `ulimit -Hn 100; orch doctor --hosts n001` was refused, needing "about 132").
"""

from __future__ import annotations

import resource
from typing import TYPE_CHECKING

from orchestrator.errors import OrchError, UsageError

if TYPE_CHECKING:  # not imported at run time: the inventory's models cost ~0.15 s of `orch --help`
    from orchestrator.inventory import Inventory

FDS_PER_HOST = 4
# What the process holds besides its hosts: stdin/stdout/stderr (3); the store: SQLite's file, WAL and shm, or
# one PostgreSQL socket (3); the event loop's epoll and self-pipe (3); the resolver's ``ssh -G`` children, at most
# SPAWN_CONCURRENCY (8, transport/sshconfig.py) at once with stdin/stdout/stderr pipes each (24); and a margin of 8
# (log files, /proc reads, the agent cache being written). Measured: `orch run noop --hosts local` completes under
# `ulimit -n 20` with this reserve set to 0.
FDS_BASE = 3 + 3 + 3 + 8 * 3 + 8


def selected_count(inventory: Inventory, selector: str | None) -> int | None:
    """How many hosts ``selector`` picks from ``inventory``; None when it picks none or is not valid (the
    command reports that itself, after this check)."""
    try:
        return len(inventory.select(selector))
    except OrchError:
        return None


def needed_open_files(concurrency: int) -> int:
    """Open files a command with ``concurrency`` hosts in flight may hold at once (an upper estimate)."""
    return FDS_BASE + FDS_PER_HOST * concurrency


def ensure_open_files(concurrency: int, *, hosts: int | None = None, option: str = "--concurrency") -> int:
    """Raise the soft open-files limit to the hard one; returns the soft limit now in force.

    Raises UsageError (exit 2) when the hard limit is below :func:`needed_open_files` for the hosts in flight
    (``concurrency``, or ``hosts`` when fewer are selected: one host never needs a fan-out's files), naming both
    numbers, the highest concurrency that fits, and how to raise the limit.
    (``orch run`` with more hosts than ``concurrency`` closes each connection after reading the host's facts and
    opens it again for the host's turn, so it holds at most ``concurrency`` too.) A hard limit of
    RLIM_INFINITY is taken as the kernel's per-process maximum (``/proc/sys/fs/nr_open``).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = hard
    if hard == resource.RLIM_INFINITY:
        try:
            with open("/proc/sys/fs/nr_open") as f:
                ceiling = int(f.read().strip())
        except (OSError, ValueError):
            ceiling = max(soft, 1 << 20) if soft != resource.RLIM_INFINITY else 1 << 20
    if soft == resource.RLIM_INFINITY or soft < ceiling:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (ceiling, hard))
            soft = ceiling
        except (ValueError, OSError):
            pass  # keep the soft limit we have; the check below still tells whether it is enough
    in_flight = concurrency if hosts is None else max(1, min(concurrency, hosts))
    need = needed_open_files(in_flight)
    if soft < need:
        fits = (soft - FDS_BASE) // FDS_PER_HOST
        lower = f"use {option} {fits} or lower, or " if fits >= 1 else ""
        if in_flight == concurrency:
            asked = f"{option} {concurrency} needs"
        else:
            asked = f"{in_flight} host{'s' if in_flight != 1 else ''} at once need{'s' if in_flight == 1 else ''}"
        raise UsageError(
            f"the open-files limit is {soft} (hard limit {ceiling}); {asked} about {need} "
            f"({FDS_PER_HOST} per host in flight + {FDS_BASE})",
            f"{lower}raise the hard limit (as root: `ulimit -Hn {need}` in the shell that starts orch, "
            f"LimitNOFILE={need} in a systemd unit, or `nofile` in /etc/security/limits.conf)",
        )
    return soft
