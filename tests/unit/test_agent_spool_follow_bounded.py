"""The follow cursor (``SpoolCursor.new_lines``) reads the spool in chunks: whole lines up to the cap, an over-cap
line passed on in pieces as it is read (orch's reader counts it and makes it one error row naming its size), and
memory bounded whatever the file holds - a tester's spool ending in 3 GiB of NULs without a newline made the
agent's ``follow`` read it whole (1.4 GiB resident before the test stopped it)."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest

from agents.orch_agent import spool
from orchestrator.transport.lines import LineSplitter, OversizeLine


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 64-byte cap and 7-byte reads, so lines cross many read boundaries."""
    monkeypatch.setattr(spool, "MAX_LINE_BYTES", 64)
    monkeypatch.setattr(spool, "READ_CHUNK_BYTES", 7)


def _drain(cursor: spool.SpoolCursor) -> list[tuple[bytes, int]]:
    return list(cursor.new_lines())


def _joined(got: list[tuple[bytes, int]]) -> list[tuple[bytes, int]]:
    """Pieces of one line joined: ``(whole_line, number)`` in order."""
    out: list[tuple[bytes, int]] = []
    for raw, n in got:
        if out and out[-1][1] == n and not out[-1][0].endswith(b"\n"):
            out[-1] = (out[-1][0] + raw, n)
        else:
            out.append((raw, n))
    return out


def test_lines_across_read_boundaries_come_whole_and_numbered(tmp_path: Path, small: None) -> None:
    lines = [b'{"a":1}\n', b"\n", b'{"b":"' + b"x" * 50 + b'"}\n', b"z\n"]
    p = tmp_path / "events.jsonl"
    p.write_bytes(b"".join(lines) + b'{"partial"')
    c = spool.SpoolCursor(str(p))
    assert _drain(c) == [(raw, i) for i, raw in enumerate(lines)]
    assert (c.offset, c.line) == (sum(map(len, lines)), 4)
    with p.open("ab") as f:
        f.write(b':1}\n')
    assert _drain(c) == [(b'{"partial":1}\n', 4)]


def test_an_over_cap_line_is_passed_on_in_pieces_never_held_whole(tmp_path: Path, small: None) -> None:
    big = b'{"v":"' + b"y" * 300 + b'"}\n'
    p = tmp_path / "events.jsonl"
    p.write_bytes(b"a\n" + big + b"b\n")
    c = spool.SpoolCursor(str(p))
    got = _drain(c)
    assert all(len(raw) <= 64 + 7 for raw, _ in got)  # no piece holds the line
    assert _joined(got) == [(b"a\n", 0), (big, 1), (b"b\n", 2)]
    assert (c.offset, c.line) == (p.stat().st_size, 3)


def test_an_over_cap_line_still_being_written_continues_where_it_stopped(tmp_path: Path, small: None) -> None:
    p = tmp_path / "events.jsonl"
    p.write_bytes(b"a\n" + b"q" * 100)
    c = spool.SpoolCursor(str(p))
    first = _drain(c)
    with p.open("ab") as f:
        f.write(b"q" * 50 + b"\nnext\n")
    second = _drain(c)
    assert _joined(first + second) == [(b"a\n", 0), (b"q" * 150 + b"\n", 1), (b"next\n", 2)]
    assert c.line == 3 and _drain(c) == []


def test_orch_s_reader_makes_the_pieces_one_over_cap_line_of_its_real_size(tmp_path: Path, small: None) -> None:
    big = b"w" * 500 + b"\n"
    p = tmp_path / "events.jsonl"
    p.write_bytes(b"a\n" + big + b"b\n")
    splitter = LineSplitter(max_line=64)
    out = []
    for raw, _ in _drain(spool.SpoolCursor(str(p))):
        out += splitter.feed(raw)
    assert out == [b"a", OversizeLine(500, b"w" * 256), b"b"]


def test_a_rewritten_spool_is_still_caught_after_an_over_cap_line(tmp_path: Path, small: None) -> None:
    p = tmp_path / "events.jsonl"
    p.write_bytes(b"a\n" + b"r" * 200 + b"\n")
    c = spool.SpoolCursor(str(p))
    _drain(c)
    p.write_bytes(b"a\n" + b"r" * 199 + b"s\nmore\n")  # the over-cap line's end changed, and more after it
    with pytest.raises(spool.SpoolChanged, match="rewritten in place"):
        _drain(c)


def test_a_huge_unended_tail_is_followed_in_bounded_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spool, "MAX_LINE_BYTES", 1 << 20)  # 1 MiB cap, 64 KiB reads
    monkeypatch.setattr(spool, "READ_CHUNK_BYTES", 1 << 16)
    p = tmp_path / "events.jsonl"
    p.write_bytes(b'{"seq":0}\n')
    with p.open("r+b") as f:
        f.truncate(64 << 20)  # 64 MiB of NULs (sparse), no newline
    c = spool.SpoolCursor(str(p))
    tracemalloc.start()
    try:
        passed = 0
        for raw, _ in c.new_lines():
            passed += len(raw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert passed == 64 << 20  # every byte passed on, none held
    assert peak < 4 << 20, f"peak {peak / 2**20:.1f} MiB for a 64 MiB tail"
