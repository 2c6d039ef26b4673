"""One benchmark per GPU: a run holds a lease on every GPU of the node while its worker lives.

A lease is ``flock(LOCK_EX)`` on ``<lease dir>/<GPU UUID>.lock`` (the directory is node-local — /dev/shm by
default, see ``sysinfo.lease_dir`` — and world-writable with the sticky bit, so every user of the node takes the
same locks). ``agent start`` takes the leases before it launches the worker and hands the locked descriptors to
it (``pass_fds``): the kernel keeps a flock as long as a descriptor of it is open, so the lease ends exactly when
the worker (and anything it forked with the descriptors) is gone — a SIGKILLed worker leaves no held lease. The
lock file holds the holder's record (JSON: ``gpu, run_id, host, user, started_by, pid, started``), written
after the lock is taken and blanked by the worker when it ends; a record left in a free lock file is *stale*
(its holder died), which ``orch doctor`` shows.

Which GPUs: every GPU nvidia-smi lists (the facts orch passed in the spec, or a fresh probe), narrowed to
``CUDA_VISIBLE_DEVICES`` of the agent's environment when it is set (indices or UUIDs). A run that sees no GPU
takes no lease: CPU-only hosts are where orch's functional checks run (tiny presets) and often several users'
login nodes; serializing them would make everyone's smoke tests wait on each other while protecting no number
that is meant to be compared. Leases exist to keep GPU measurements honest.

Locks are taken in UUID order, so two runs wanting overlapping sets never deadlock.
"""

from __future__ import annotations

import csv
import errno
import fcntl
import io
import json
import os
import time
from collections.abc import Callable
from typing import Any

POLL_S = 1.0


class LeaseBusy(Exception):
    """A GPU is leased by another run. ``holder`` is its record (may be partial)."""

    def __init__(self, gpu: str, holder: dict[str, Any]) -> None:
        self.gpu = gpu
        self.holder = holder
        who = holder.get("started_by") or "?"
        super().__init__(
            "GPU {} is in use by run {} (started by {}, running as {} on {}, since {})".format(
                gpu,
                holder.get("run_id") or "?",
                who,
                holder.get("user") or "?",
                holder.get("host") or "?",
                holder.get("started") or "?",
            )
        )


def gpu_uuids(facts: dict[str, Any] | None = None) -> list[str]:
    """UUIDs of the GPUs this run uses (see the module docstring), sorted."""
    smi = (facts or {}).get("nvidia_smi") if isinstance(facts, dict) else None
    if not isinstance(smi, dict) or "stdout" not in smi:
        from .sysinfo import _nvidia_smi  # only without orch's facts: a start on a GPU-less host loads no sysinfo

        smi = _nvidia_smi()
    uuids = []
    rows = list(csv.reader(io.StringIO(str(smi.get("stdout") or ""))))
    col = None
    for row in rows:
        cells = [c.strip() for c in row]
        if col is None:
            for i, c in enumerate(cells):
                if c.lower() == "uuid":
                    col = i
            continue
        if len(cells) > col and cells[col].startswith(("GPU-", "MIG-")):
            uuids.append(cells[col])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        keep = []
        for tok in (t.strip() for t in visible.split(",") if t.strip()):
            if tok.isdigit() and int(tok) < len(uuids):
                keep.append(uuids[int(tok)])
            else:
                keep.extend(u for u in uuids if u.startswith(tok))
        uuids = keep
    return sorted(set(uuids))


def _open_lock(path: str) -> int:
    d = os.path.dirname(path)
    if not os.path.isdir(d):
        try:
            os.makedirs(d, exist_ok=True)
            os.chmod(d, 0o1777)  # every user of the node shares it, each may only remove their own files
        except OSError:
            pass
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        os.fchmod(fd, 0o666)  # under our umask 077 it would be created 0600: others could not record themselves
    except OSError:
        pass  # someone else's file, already 0666
    return fd


def read_record(fd_or_path: Any) -> dict[str, Any]:
    try:
        if isinstance(fd_or_path, int):
            raw = os.pread(fd_or_path, 65536, 0)
        else:
            with open(fd_or_path, "rb") as f:
                raw = f.read(65536)
        doc = json.loads(raw.decode("utf-8", "replace")) if raw.strip() else {}
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def write_record(fd: int, record: dict[str, Any]) -> None:
    data = json.dumps(record, sort_keys=True).encode("utf-8")
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def acquire(
    uuids: list[str], wait_s: float = 0.0, on_wait: Callable[[LeaseBusy], None] | None = None
) -> dict[str, int]:
    """Lock every GPU in ``uuids``: ``{uuid: fd}``. Raises LeaseBusy (naming the holder) when one stays held
    past ``wait_s`` seconds (0: at once); ``on_wait`` is called once when waiting starts. OSError when the lease
    directory cannot be used."""
    deadline = time.monotonic() + max(0.0, wait_s)
    told = False
    from .sysinfo import lease_dir

    d = lease_dir()
    while True:
        held: dict[str, int] = {}
        try:
            for u in sorted(uuids):
                fd = _open_lock(os.path.join(d, u + ".lock"))
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as exc:
                    busy = LeaseBusy(u, read_record(fd))
                    os.close(fd)
                    if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                        raise
                    raise busy from None
                held[u] = fd
            return held
        except LeaseBusy as busy:
            release(held)
            if time.monotonic() >= deadline:
                raise
            if on_wait is not None and not told:
                on_wait(busy)
                told = True
            time.sleep(min(POLL_S, max(0.0, deadline - time.monotonic())))


def release(held: dict[str, int]) -> None:
    for fd in held.values():
        try:
            os.close(fd)
        except OSError:
            pass


def clear_records(paths: list[str], pid: int) -> None:
    """Blank the records this worker (``pid``) left in its lock files, so a finished run is not shown as stale.
    Opening a second descriptor and closing it does not release a flock (locks belong to the open file)."""
    for path in paths:
        try:
            fd = os.open(path, os.O_RDWR)
        except OSError:
            continue
        try:
            if read_record(fd).get("pid") == pid:
                os.ftruncate(fd, 0)
        except OSError:
            pass
        finally:
            os.close(fd)
