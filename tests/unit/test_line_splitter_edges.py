"""``LineSplitter`` at its edges (pure): a 1-byte cap, a buffer exactly at the cap, an oversize line's head taken
from the buffer and the chunk, and an oversize line that keeps streaming — the survivors of mutation testing
``orchestrator/transport/lines.py`` (docs/testing.md)."""

from __future__ import annotations

import pytest

from orchestrator.transport.lines import HEAD_BYTES, MAX_LINE_BYTES, LineSplitter, OversizeLine


def test_the_cap_and_head_sizes() -> None:
    assert MAX_LINE_BYTES == 64 * 2**20 and LineSplitter().max_line == 64 * 2**20  # 64 MiB
    assert HEAD_BYTES == 256


def test_a_one_byte_cap_is_valid_and_zero_is_refused() -> None:
    sp = LineSplitter(1)
    assert sp.feed(b"a\nbc\n\n") == [b"a", OversizeLine(2, b"bc"), b""]
    for bad in (0, -1):
        with pytest.raises(ValueError, match=r"^max_line must be at least 1 byte$"):
            LineSplitter(bad)


def test_a_line_held_exactly_at_the_cap_is_whole() -> None:
    sp = LineSplitter(10)
    assert sp.feed(b"0123456789") == [] and sp.pending == 10  # held, not yet oversize
    assert sp.feed(b"\n") == [b"0123456789"]
    assert sp.feed(b"01234") == [] and sp.feed(b"56789\n") == [b"0123456789"]  # buffer + chunk = the cap


def test_oversize_head_is_the_buffer_then_the_chunk() -> None:
    sp = LineSplitter(300)
    assert sp.feed(b"a" * 100) == []
    assert sp.feed(b"b" * 250 + b"\nok\n") == [OversizeLine(350, b"a" * 100 + b"b" * 156), b"ok"]


def test_an_oversize_line_streaming_on_keeps_a_256_byte_head_and_counts_every_byte() -> None:
    sp = LineSplitter(10)
    assert sp.feed(b"0123456789A") == [] and sp.pending == 11  # over the cap: skipping from here
    assert sp.feed(b"BCD") == [] and sp.pending == 14  # a chunk without a newline while skipping
    assert sp.feed(b"x" * 1000) == [] and sp.pending == 1014
    head = b"0123456789ABCD" + b"x" * (256 - 14)
    assert sp.feed(b"yy\nz\n") == [OversizeLine(1016, head), b"z"]
    assert len(head) == 256 and sp.pending == 0


def test_an_oversize_head_never_holds_the_next_line() -> None:
    """With a cap below HEAD_BYTES the head used to run past the newline into the next line's bytes."""
    sp = LineSplitter(3)
    assert sp.feed(b"abcd\nnext\n") == [OversizeLine(4, b"abcd"), OversizeLine(4, b"next")]
    assert sp.feed(b"ab") == [] and sp.feed(b"cd\nxy\n") == [OversizeLine(4, b"abcd"), b"xy"]


def test_a_line_past_the_cap_never_holds_more_than_the_cap_in_memory() -> None:
    """The cap bounds memory, not only what is returned: a line growing in chunks is dropped to its head as soon as
    it would pass the cap, before its newline arrives (a 64 MiB cap must not let a 2 GB line into memory). The
    mutation `len(buf) - n > cap` kept the output the same but let the buffer grow past the cap."""
    cap = 10
    s = LineSplitter(cap)
    for _ in range(100):  # 700 bytes of one line, 7 at a time, no newline yet
        assert s.feed(b"x" * 7) == []
        assert len(s._buf) <= cap
    (line,) = s.feed(b"\n")
    assert isinstance(line, OversizeLine) and line.size == 700
