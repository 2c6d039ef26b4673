"""The orch process that drives a run (its *controller*), recorded in the run's ``info``, so that a run left
``running`` by a controller that died (killed, its machine rebooted, its terminal closed) is told from one being
collected — pure but for reading ``/proc``.

``orch run`` and ``orch run --resume`` record :func:`this_process` when they start driving a run;
``orch runs show`` asks :func:`gone` of a run still ``pending``/``running`` and then says so, with the command
that collects the rest (``orch run --resume``). Only a controller on this machine can be judged: pids are
per machine; on another one nothing is said.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from typing import Any

BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"  # a new UUID at every boot (proc(5), random(4))


def _boot_id() -> str | None:
    try:
        with open(BOOT_ID_PATH) as f:
            return f.read().strip() or None
    except OSError:
        return None


def _start_ticks(pid: int) -> int | None:
    """Field 22 of ``/proc/PID/stat`` (``starttime``, clock ticks after boot): with the boot id, it tells a pid
    from a later process given the same pid. None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    try:  # the command name (field 2) may hold spaces and parentheses: fields are counted after its last ')'
        return int(stat[stat.rindex(b")") + 2 :].split()[19])
    except (ValueError, IndexError):
        return None


def this_process() -> dict[str, Any]:
    """``{"host", "pid", "boot_id", "start_ticks"}`` of the calling process, as the run's ``info.controller``."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "boot_id": _boot_id(), "start_ticks": _start_ticks(pid)}


def gone(info: Mapping[str, Any] | None) -> str | None:
    """Why the controller recorded in ``info`` (a run's ``info.controller``) no longer drives the run, as one
    sentence; None when it still runs, when nothing was recorded, or when it ran on another machine (its pid
    means nothing here)."""
    if not isinstance(info, Mapping):
        return None
    host, pid = info.get("host"), info.get("pid")
    if host != socket.gethostname() or isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return None
    boot = info.get("boot_id")
    if isinstance(boot, str) and boot and _boot_id() not in (None, boot):
        return f"the orch process that drove it (pid {pid} on {host}) is gone: {host} has rebooted since"
    ticks = _start_ticks(pid)
    if ticks is None:
        return f"the orch process that drove it (pid {pid} on {host}) is gone"
    if isinstance(info.get("start_ticks"), int) and ticks != info["start_ticks"]:
        return f"the orch process that drove it (pid {pid} on {host}) is gone (pid {pid} is now another process)"
    return None
