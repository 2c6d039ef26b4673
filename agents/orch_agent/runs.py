"""A run's directory on the host and the liveness of its worker.

``<orch_home>/runs/<run_id>/`` holds ``spec.json``, ``pid`` (the worker's pid, which is also its process group
and session id), ``events.jsonl`` (the spool), and ``worker.log`` (the
worker's stdout and stderr: tracebacks of crashes that the spool could not record).
"""

from __future__ import annotations

import errno
import os
import re
from typing import Any

from .spool import SPOOL_NAME, find_done, read_lines
from .sysinfo import resolve_home

_RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def valid_run_id(run_id: str) -> bool:
    """Run ids name a directory: letters, digits, ``._-``, no leading dot, at most 128 characters."""
    return bool(_RUN_ID_RE.match(run_id))


class RunDir:
    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        self.run_id = os.path.basename(self.path)

    @classmethod
    def for_run(cls, run_id: str, orch_home: str | None = None) -> RunDir:
        return cls(os.path.join(resolve_home(orch_home), "runs", run_id))

    @property
    def orch_home(self) -> str:
        return os.path.dirname(os.path.dirname(self.path))

    @property
    def spool(self) -> str:
        return os.path.join(self.path, SPOOL_NAME)

    @property
    def spec_path(self) -> str:
        return os.path.join(self.path, "spec.json")

    @property
    def pid_path(self) -> str:
        return os.path.join(self.path, "pid")

    def exists(self) -> bool:
        return os.path.isdir(self.path)

    def pid(self) -> int | None:
        try:
            with open(self.pid_path) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def worker_alive(self) -> bool:
        pid = self.pid()
        return pid is not None and is_worker(pid, self.path)

    def status(self) -> dict[str, Any]:
        """``{"run_id", "state": running|finished|dead|unknown, "pid", "lines", "done"}``."""
        pid = self.pid()
        lines = read_lines(self.spool)
        done = find_done(lines)
        if not self.exists():
            state = "unknown"
        elif done is not None:
            state = "finished"
        elif pid is None:
            state = "unknown"
        elif is_worker(pid, self.path):
            state = "running"
        else:
            state = "dead"
        return {"run_id": self.run_id, "state": state, "pid": pid, "lines": len(lines), "done": done}


def pid_alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie (an unreaped zombie counts as gone)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            return False
        # EPERM: it exists but belongs to someone else.
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return stat[stat.rindex(")") + 2] != "Z"
    except (OSError, ValueError, IndexError):
        return True


def is_worker(pid: int, run_dir: str) -> bool:
    """Alive, and (where /proc tells) still the worker of ``run_dir`` rather than a recycled pid."""
    if not pid_alive(pid):
        return False
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return True
    return b"_worker" in argv and os.fsencode(run_dir) in argv


def group_alive(pgid: int) -> bool:
    """True when any non-zombie process is left in process group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except OSError as exc:
        if exc.errno == errno.ESRCH:
            return False
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2 :].split()
        if len(rest) > 2 and rest[2] == str(pgid) and rest[0] != "Z":
            return True
    return False
