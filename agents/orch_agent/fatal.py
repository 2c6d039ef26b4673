"""The worker's last words, for when the spool cannot take them.

A worker that cannot append to its spool (``ENOSPC``, ``EIO``, ``EDQUOT`` ...) has nowhere to say so: the disk is
full. So before the first case it reserves :data:`REASON_BYTES` in ``<run_dir>/reason`` (written out as spaces,
so the blocks are allocated while there is room) and, when it dies of an error, overwrites that reserved space in
place: overwriting allocated blocks needs no new ones on ext4, xfs and tmpfs. (On copy-on-write filesystems such as
btrfs or ZFS even that may fail; then ``follow`` says the worker died without saying why.) ``follow`` and
``status`` read it back and hand it to orch, which shows it as the host's error.
"""

from __future__ import annotations

import json
import os

REASON_BYTES = 4096


def write_synced(path: str, data: bytes) -> None:
    """Create or truncate ``path`` (0600), write every byte of ``data`` (``os.write`` may write less than asked)
    and fsync it before closing. Raises OSError (ENOSPC, EIO, ...); the agent's other files use it too."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def reserve(path: str) -> None:
    """Create ``path`` (0600) holding REASON_BYTES of blanks. Raises OSError (the disk is already full)."""
    write_synced(path, b" " * (REASON_BYTES - 1) + b"\n")


def encode(message: str) -> bytes:
    """``{"reason": message}`` as one JSON line padded with blanks to exactly REASON_BYTES (message cut to fit)."""
    text = message
    while True:
        raw = json.dumps({"reason": text}).encode("utf-8")
        if len(raw) < REASON_BYTES:
            return raw + b" " * (REASON_BYTES - 1 - len(raw)) + b"\n"
        text = text[: max(0, len(text) - (len(raw) - REASON_BYTES) - 16)] + "..."


def record(path: str, message: str) -> bool:
    """Write ``message`` into the reserved file without growing it; True when it was written. Never raises."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    except OSError:
        return False
    try:
        data = encode(message)
        written = 0
        while written < len(data):
            written += os.pwrite(fd, data[written:], written)
        os.fsync(fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def read_reason(path: str) -> str | None:
    """The recorded reason, or None (nothing recorded, or no such file)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(REASON_BYTES * 2).strip()
    except OSError:
        return None
    if not raw:
        return None
    try:
        doc = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return raw.decode("utf-8", "replace")[:REASON_BYTES]
    reason = doc.get("reason") if isinstance(doc, dict) else None
    return reason if isinstance(reason, str) and reason else None
