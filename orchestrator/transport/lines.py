"""Whole lines out of a byte stream, of any length up to a cap — pure.

The agent's ``follow`` prints spool lines; the ingest path must see each one whole, or know that it could not.
Stream readers' ``readline`` does neither for long lines: asyncio's ``StreamReader`` raises past its 64 KiB
limit, and asyncssh's returns a *piece* of the line once its receive window (2 MiB) is full. So the transports
read chunks and cut them here:

- a line (newline excluded) of up to ``max_line`` bytes comes out as one ``bytes``, never split;
- a longer line comes out as exactly one :class:`OversizeLine` (its size and its first bytes), its content
  dropped as it streams by — memory stays bounded by ``max_line`` whatever the peer sends;
- bytes after the last newline are an unfinished line: kept until its newline arrives, never yielded at the end
  of the stream (a dropped connection leaves half a line; the follower re-reads it whole from its position).

Each byte is copied a bounded number of times (linear in the stream), unlike re-joining a growing buffer per chunk.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias

MAX_LINE_BYTES = 64 * 1024 * 1024
"""The longest agent line orch ingests (64 MiB, newline excluded). Result lines are small by design (large tool
output stays on the host, events carry excerpts); the cap bounds orch's memory per host against a runaway line."""

STREAM_CHUNK_BYTES = 256 * 1024  # one read from a stream: what is buffered, up to this
HEAD_BYTES = 256  # kept of an oversize line, to name what it was (its seq, its type) in the error row


@dataclass(frozen=True)
class OversizeLine:
    """A line longer than the cap: ``size`` bytes (newline excluded), ``head`` its first ``HEAD_BYTES``."""

    size: int
    head: bytes


Line: TypeAlias = bytes | OversizeLine


class LineSplitter:
    """Incremental splitter: ``feed(chunk)`` returns the lines that chunk completed, in order."""

    def __init__(self, max_line: int = MAX_LINE_BYTES) -> None:
        if max_line < 1:
            raise ValueError("max_line must be at least 1 byte")
        self.max_line = max_line
        self._buf = bytearray()
        self._skipped: int | None = None  # bytes of an oversize line seen so far, when inside one
        self._head = b""

    @property
    def pending(self) -> int:
        """Bytes of the unfinished last line held (or skipped) so far."""
        return self._skipped if self._skipped is not None else len(self._buf)

    def feed(self, chunk: bytes) -> list[Line]:
        out: list[Line] = []
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                break
            out.append(self._finish(chunk, start, nl))
            start = nl + 1
        if start < len(chunk):
            self._grow(chunk, start, len(chunk))
        return out

    def _finish(self, chunk: bytes, start: int, end: int) -> Line:
        n = end - start
        if self._skipped is not None:
            self._keep_head(chunk, start, end)
            line: Line = OversizeLine(self._skipped + n, self._head)
            self._skipped, self._head = None, b""
            return line
        if not self._buf:
            if n <= self.max_line:
                return chunk[start:end]
            return OversizeLine(n, chunk[start : min(end, start + HEAD_BYTES)])  # a head never runs past the line
        if len(self._buf) + n > self.max_line:
            line = OversizeLine(
                len(self._buf) + n,
                (bytes(self._buf[:HEAD_BYTES]) + chunk[start : min(end, start + HEAD_BYTES)])[:HEAD_BYTES],
            )
        else:
            self._buf += chunk[start:end]
            line = bytes(self._buf)
        self._buf.clear()
        return line

    def _grow(self, chunk: bytes, start: int, end: int) -> None:
        if self._skipped is not None:
            self._keep_head(chunk, start, end)
            self._skipped += end - start
            return
        if len(self._buf) + (end - start) > self.max_line:
            head = (bytes(self._buf[:HEAD_BYTES]) + chunk[start : start + HEAD_BYTES])[:HEAD_BYTES]
            self._skipped, self._head = len(self._buf) + end - start, head
            self._buf.clear()
            return
        self._buf += chunk[start:end]

    def _keep_head(self, chunk: bytes, start: int, end: int) -> None:
        if len(self._head) < HEAD_BYTES:
            self._head += chunk[start : min(end, start + HEAD_BYTES - len(self._head))]
