"""The run's event spool: one JSON object per line, appended atomically, ``seq`` = 0-based line number.

Writers (the worker, and ``cancel`` when it has to write ``done`` for a killed worker) open the file with
``O_APPEND``, take ``fcntl.flock`` for the count-then-write step and write each line with a single
``os.write``, so a follower never sees half a line from us and two writers never reuse a seq. A write that fails
part-way (``ENOSPC``, ``EIO``, a short write) is truncated back to the line's start, so the spool never ends in
half a line of ours, and raises :class:`SpoolWriteError` naming the path and the errno. A last line without its
newline (left by something else) counts as a line; the next append starts on a fresh line.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import time
from collections.abc import Iterator
from typing import Any

from . import PROTOCOL_VERSION

SPOOL_NAME = "events.jsonl"

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest spool line read whole (64 MiB, newline excluded): orch's cap on a followed line
(orchestrator/transport/lines.py ``MAX_LINE_BYTES``). :func:`read_lines` keeps memory bounded by it."""

READ_CHUNK_BYTES = 1024 * 1024  # one read of the spool by read_lines


class SpoolReadError(Exception):
    """The spool could not be read (an I/O error, or it is not a regular file: a FIFO, a device ...). The message
    names the path and the errno's name and text, as :class:`SpoolWriteError` does for writes."""

    def __init__(self, path: str, exc: OSError | str) -> None:
        if isinstance(exc, str):
            super().__init__(f"cannot read {path}: {exc}")
            self.errno = None
        else:
            name = errno.errorcode.get(exc.errno or 0, "")
            super().__init__(f"cannot read {path}: {exc.strerror or exc} ({name or 'errno ' + str(exc.errno)})")
            self.errno = exc.errno
        self.path = path


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words (``a FIFO``, ``a directory`` ...)."""
    for test, what in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"),
                       (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return what
    return "not a regular file"


def open_spool(path: str) -> Any:
    """The spool opened for reading (a binary file object), or None when it does not exist. Opened with
    ``O_NONBLOCK`` (a FIFO at the path never blocks the open) and refused unless it is a regular file (a FIFO, a
    device such as a link to /dev/zero, a directory): raises :class:`SpoolReadError` naming the path and what it
    is, or the OSError's errno (EIO, ...)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise SpoolReadError(path, exc) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise SpoolReadError(path, f"it is {file_kind(mode)}, not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, OSError):
            raise SpoolReadError(path, exc) from None
        raise


def count_lines(data: bytes) -> int:
    """Lines in ``data``, counting a trailing line that lacks its newline."""
    n = data.count(b"\n")
    if data and not data.endswith(b"\n"):
        n += 1
    return n


def encode_event(seq: int, type_: str, fields: dict[str, Any], ts: float | None = None) -> bytes:
    doc: dict[str, Any] = {
        "v": PROTOCOL_VERSION,
        "seq": seq,
        "type": type_,
        "ts": round(time.time() if ts is None else ts, 6),
    }
    doc.update(fields)
    return (json.dumps(doc, separators=(",", ":"), allow_nan=False, default=str) + "\n").encode("utf-8")


class SpoolWriteError(BaseException):
    """The spool could not take a line (disk full, I/O error): the run cannot go on, since nothing it measured
    could be recorded. A BaseException so that benches and the worker's per-case handlers, which catch Exception,
    do not swallow it; the worker records it as its reason for dying (see :mod:`.fatal`)."""

    def __init__(self, path: str, exc: OSError | str) -> None:
        if isinstance(exc, str):  # the spool changed under its writer (Spool._position): no errno
            super().__init__(f"cannot write {path}: {exc}")
            self.errno = None
        else:
            name = errno.errorcode.get(exc.errno or 0, "")
            super().__init__(f"cannot write {path}: {exc.strerror or exc} ({name or 'errno ' + str(exc.errno)})")
            self.errno = exc.errno
        self.path = path


class Spool:
    """Appender for one spool file. ``append`` returns the seq it wrote."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            # read-write: the last bytes this appender wrote are read back (os.pread) before each append
            self._fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as exc:
            raise SpoolWriteError(path, exc) from None
        self._known: tuple[int, int, bool] | None = None  # (size, lines, ends_with_newline)
        self._tail = b""  # the file's last TAIL bytes up to _known's size, as this appender last saw or wrote them
        self.written = 0  # lines this appender wrote: the agent's own count, reconciled by orch at done

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Spool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    TAIL = 64  # bytes before the known end read back on each append (as SpoolCursor.TAIL for the follower)

    def _position(self) -> tuple[int, int, bool]:
        """``(size in bytes, lines, ends with a newline)`` of the spool now, and the file's last :attr:`TAIL`
        bytes in ``_tail``. Raises SpoolWriteError when the spool is not the one this appender knows: the file was
        removed, or another file is at its path (renamed over it, also when a hard link keeps the old one: its
        (st_dev, st_ino) is compared with the path's, not only st_nlink); it is shorter than what this appender
        has seen (truncated); or the last bytes this appender saw or wrote are not at their place any more
        (rewritten in place, at the same length or cut and grown back). Going on would number new lines from
        what is left, lines that a follower from the stored position would take for the lost ones. Other writers
        only append, under the flock (``cancel``'s ``done``): a larger size with those bytes intact."""
        st = os.fstat(self._fd)
        size = st.st_size
        try:
            at_path = os.stat(self.path)
            replaced = (at_path.st_dev, at_path.st_ino) != (st.st_dev, st.st_ino)
        except FileNotFoundError:
            replaced = True
        if replaced:  # a removed file (st_nlink 0) has no path, or another file at it
            raise SpoolWriteError(self.path, "the spool was removed or replaced by something other than the agent; "
                                  "its lines are no longer at this path")  # fmt: skip
        if self._known is not None:
            known_size, known_lines, _ = self._known
            if size < known_size:
                raise SpoolWriteError(
                    self.path,
                    f"the spool was truncated by something other than the agent ({known_size} bytes, "
                    f"{known_lines} lines, before; {size} bytes now); not numbering new lines from what is left",
                )
            if self._tail and os.pread(self._fd, len(self._tail), known_size - len(self._tail)) != self._tail:
                raise SpoolWriteError(
                    self.path,
                    f"the spool was rewritten in place by something other than the agent (its bytes before "
                    f"{known_size}, the end of line {known_lines - 1} as the agent wrote it, differ now; "
                    f"{size} bytes now); not numbering new lines from what is left",
                )
            if known_size == size:
                return size, known_lines, self._known[2]
        with open(self.path, "rb") as f:
            data = f.read()
        self._tail = data[-self.TAIL :]
        return len(data), count_lines(data), (not data or data.endswith(b"\n"))

    def append(self, type_: str, fsync: bool = False, **fields: Any) -> int:
        """Append one event as one whole line; returns its seq. Raises SpoolWriteError (nothing of the line is
        left in the file) when the line cannot be written."""
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        except OSError as exc:
            raise SpoolWriteError(self.path, exc) from None
        try:
            try:
                size, seq, clean_end = self._position()
            except OSError as exc:  # EIO reading the spool back: the same error as a failed write
                self._known = None
                raise SpoolWriteError(self.path, exc) from None
            line = encode_event(seq, type_, fields)
            if not clean_end:
                line = b"\n" + line
            try:
                view = memoryview(line)
                while view:  # os.write may write less than asked (a signal, a nearly full disk)
                    view = view[os.write(self._fd, view) :]
                if fsync:
                    os.fsync(self._fd)
            except OSError as exc:
                try:
                    os.ftruncate(self._fd, size)  # whole lines only: take back what part of the line got in
                except OSError:
                    pass
                self._known = None
                raise SpoolWriteError(self.path, exc) from None
            self._known = (size + len(line), seq + 1, True)
            self._tail = (self._tail + line)[-self.TAIL :]
            self.written += 1
            return seq
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)


def line_type(raw: bytes) -> str | None:
    """The ``type`` of a spool line, or None when it is not a JSON object."""
    try:
        doc = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return None
    t = doc.get("type") if isinstance(doc, dict) else None
    return t if isinstance(t, str) else None


def oversize_line(size: int) -> bytes:
    """What :func:`read_lines` keeps of a line longer than :data:`MAX_LINE_BYTES`: one ``error`` line naming its
    size, as orch makes one error row of such a line when it follows it (never split, its content dropped)."""
    doc = {"type": "error", "error": f"spool line of {size} bytes is over the {MAX_LINE_BYTES} bytes cap"}
    return json.dumps(doc, separators=(",", ":")).encode("utf-8") + b"\n"


def read_lines(path: str) -> list[bytes]:
    """Complete lines (with their newline) of the spool; a trailing partial line is left out. A line ends at
    ``\\n`` only, as orch counts the spool's lines (its seq is its position): ``bytes.splitlines`` also broke at a
    lone ``\\r``, which JSON allows between tokens, so the agent's count of a spool could differ from orch's.

    Read streaming, :data:`READ_CHUNK_BYTES` at a time: a line longer than :data:`MAX_LINE_BYTES` is kept as one
    :func:`oversize_line`, and a partial last line is dropped as it streams by, so memory stays bounded whatever
    the file holds. Raises :class:`SpoolReadError` (see :func:`open_spool`; an I/O error while reading)."""
    f = open_spool(path)
    if f is None:
        return []
    lines: list[bytes] = []
    buf = bytearray()
    skipped: int | None = None  # bytes of an over-cap line seen so far, when inside one
    with f:
        while True:
            try:
                chunk = f.read(READ_CHUNK_BYTES)
            except OSError as exc:
                raise SpoolReadError(path, exc) from None
            if not chunk:
                return lines
            start = 0
            while True:
                nl = chunk.find(b"\n", start)
                if nl < 0:
                    break
                if skipped is not None:
                    lines.append(oversize_line(skipped + nl - start))
                    skipped = None
                elif len(buf) + nl - start > MAX_LINE_BYTES:
                    lines.append(oversize_line(len(buf) + nl - start))
                else:
                    lines.append(bytes(buf) + chunk[start : nl + 1])
                buf.clear()
                start = nl + 1
            rest = len(chunk) - start
            if skipped is not None:
                skipped += rest
            elif len(buf) + rest > MAX_LINE_BYTES:
                skipped = len(buf) + rest
                buf.clear()
            else:
                buf += chunk[start:]


def find_done(lines: list[bytes]) -> dict[str, Any] | None:
    """The last ``done`` event in ``lines`` as a dict, or None."""
    for raw in reversed(lines):
        if b'"done"' in raw and line_type(raw) == "done":
            doc = json.loads(raw.decode("utf-8", "replace"))
            return doc if isinstance(doc, dict) else None
    return None


def iter_new_lines(path: str, offset: int, line_no: int) -> Iterator[tuple[bytes, int, int]]:
    """Complete lines after byte ``offset`` (which is the start of line ``line_no``).

    Yields ``(raw_line, line_no_of_it, offset_after_it)``; a partial last line is not yielded (read it later).
    """
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except FileNotFoundError:
        return
    for raw, pos in _complete_lines(data):
        yield raw, line_no, offset + pos
        line_no += 1


def _complete_lines(data: bytes):
    """Each newline-terminated line of ``data`` with the offset just past it; a partial last line is left out."""
    pos = 0
    while True:
        nl = data.find(b"\n", pos)
        if nl < 0:
            return
        yield data[pos : nl + 1], nl + 1
        pos = nl + 1


class SpoolChanged(Exception):
    """The spool a follower reads was truncated, replaced or rewritten under it (not by the agent, which only
    appends): the lines it already passed on may not be the file's any more. The message says which and where."""


class SpoolCursor:
    """A follower's place in a spool (byte ``offset`` = start of line ``line``) and the proof that the file it
    reads is still the one it read: same device and inode (not replaced by a rename or a new file), not shorter
    than ``offset`` (not truncated, e.g. ``cat t > events.jsonl``), and the last bytes before ``offset``
    unchanged (not rewritten in place and grown back). Each :meth:`new_lines` raises :class:`SpoolChanged` when
    one of these fails, before reading anything past ``offset``: never a half line or a foreign line."""

    TAIL = 64  # bytes before offset compared on each read (one poll: one fstat and two small reads)

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.line = 0
        self._ident: tuple[int, int] | None = None
        self._tail = b""  # the last TAIL bytes before offset
        self._passed = 0  # bytes of the over-cap line at offset already passed on (see new_lines)
        self._recent = b""  # the last TAIL bytes passed on

    def _changed(self, what: str) -> SpoolChanged:
        return SpoolChanged(
            f"the spool {self.path} was {what} on the host while orch followed it "
            f"({self.line} lines, {self.offset} bytes, had been read)"
        )

    def new_lines(self) -> Iterator[tuple[bytes, int]]:
        """Lines past ``offset`` as ``(raw_bytes, its_line_number)``, advancing the cursor; a partial last line is
        left for a later call. Nothing while the file does not exist yet (unless it existed).

        Read :data:`READ_CHUNK_BYTES` at a time, so memory stays bounded whatever the file holds: a line longer
        than :data:`MAX_LINE_BYTES` is passed on in pieces as it is read (the same line number each time, the last
        piece ending with its newline), never held whole; orch's reader counts it and makes it one error row
        naming its size (orchestrator/transport/lines.py). Raises :class:`SpoolReadError` (an I/O error, or not a
        regular file) and :class:`SpoolChanged`."""
        f = open_spool(self.path)  # SpoolReadError: an I/O error, or not a regular file (a FIFO never blocks)
        if f is None:
            if self._ident is not None:
                raise self._changed("removed")
            return
        with f:
            try:
                st = os.fstat(f.fileno())
                ident = (st.st_dev, st.st_ino)
                if self._ident is None:
                    self._ident = ident
                elif ident != self._ident:
                    raise self._changed("replaced (another file is at its path now)")
                if st.st_size < self.offset + self._passed:
                    raise self._changed(f"truncated (to {st.st_size} bytes)")
                if self._tail:
                    f.seek(self.offset - len(self._tail))
                    if f.read(len(self._tail)) != self._tail:
                        raise self._changed("rewritten in place")
                f.seek(self.offset + self._passed)
            except OSError as exc:  # EIO ...: the host's error, naming the path and the errno
                raise SpoolReadError(self.path, exc) from None
            pending = bytearray()  # bytes of the current line read by this call and not yet passed on
            while True:
                try:
                    chunk = f.read(READ_CHUNK_BYTES)
                except OSError as exc:
                    raise SpoolReadError(self.path, exc) from None
                if not chunk:
                    return  # what is pending is a partial line: read again from its start (or piece) next time
                start = 0
                while True:
                    nl = chunk.find(b"\n", start)
                    if nl < 0:
                        break
                    raw = bytes(pending) + chunk[start : nl + 1]
                    pending.clear()
                    self._recent = (self._recent + raw)[-self.TAIL :]
                    self.offset += self._passed + len(raw)
                    self._passed = 0
                    self._tail = self._recent
                    self.line += 1
                    yield raw, self.line - 1
                    start = nl + 1
                pending += chunk[start:]
                if self._passed or len(pending) > MAX_LINE_BYTES:  # an over-cap line: passed on as it is read
                    piece = bytes(pending)
                    pending.clear()
                    self._recent = (self._recent + piece)[-self.TAIL :]
                    self._passed += len(piece)
                    yield piece, self.line
