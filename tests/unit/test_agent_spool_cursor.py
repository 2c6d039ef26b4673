"""The agent's ``follow`` cursor (agents/orch_agent/spool.py ``SpoolCursor``) on real files: whole lines in order,
and a spool changed under it — truncated (``cat t > events.jsonl``), replaced, rewritten in place, removed — is
one ``SpoolChanged`` naming the file and what was read, before any byte past the read offset is passed on."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agents.orch_agent.spool import SpoolChanged, SpoolCursor


def _lines(n: int, start: int = 0) -> bytes:
    return b"".join(b'{"seq": %d, "type": "log"}\n' % i for i in range(start, start + n))


def test_whole_lines_in_order_a_partial_line_waits(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    cur = SpoolCursor(str(path))
    assert list(cur.new_lines()) == []  # not there yet: nothing, no error
    path.write_bytes(_lines(2) + b'{"seq": 2')
    assert [n for _, n in cur.new_lines()] == [0, 1]
    assert (cur.line, cur.offset) == (2, len(_lines(2)))
    with open(path, "ab") as f:
        f.write(b', "type": "log"}\n')
    assert list(cur.new_lines()) == [(b'{"seq": 2, "type": "log"}\n', 2)]
    assert list(cur.new_lines()) == []


@pytest.mark.parametrize("keep", [0, 3])
def test_truncated_in_place_is_named(tmp_path: Path, keep: int) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(_lines(8))
    cur = SpoolCursor(str(path))
    assert len(list(cur.new_lines())) == 8
    head = b"".join(path.read_bytes().splitlines(keepends=True)[:keep])
    with open(path, "r+b") as f:  # what `head -n 3 events.jsonl > t; cat t > events.jsonl` does: same inode
        f.truncate(0)
        f.write(head)
    with pytest.raises(SpoolChanged) as err:
        list(cur.new_lines())
    assert str(err.value) == (
        f"the spool {path} was truncated (to {len(head)} bytes) on the host while orch followed it "
        f"(8 lines, {len(_lines(8))} bytes, had been read)"
    )


def test_rewritten_in_place_and_grown_back_is_named(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(_lines(4))
    cur = SpoolCursor(str(path))
    assert len(list(cur.new_lines())) == 4
    with open(path, "r+b") as f:  # truncated to 2 lines, then more lines appended past the old size
        f.truncate(len(_lines(2)))
        f.seek(0, os.SEEK_END)
        f.write(_lines(3, start=100))
    assert path.stat().st_size > cur.offset
    with pytest.raises(SpoolChanged, match=r"was rewritten in place on the host while orch followed it \(4 lines"):
        list(cur.new_lines())


def test_replaced_or_removed_is_named(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(_lines(2))
    cur = SpoolCursor(str(path))
    assert len(list(cur.new_lines())) == 2
    other = tmp_path / "copy.jsonl"
    other.write_bytes(_lines(3))
    os.replace(other, path)  # another file at the path (a copy moved over it)
    with pytest.raises(SpoolChanged, match="was replaced \\(another file is at its path now\\)"):
        list(cur.new_lines())
    path.unlink()
    with pytest.raises(SpoolChanged, match="was removed on the host"):
        list(cur.new_lines())


def test_appends_by_the_agent_are_never_a_change(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    cur = SpoolCursor(str(path))
    got: list[int] = []
    for i in range(50):
        line = _lines(1, start=i)
        parts = [line[:5], line[5:]] if i % 2 else [line]  # every other line is read half-written first
        for part in parts:
            with open(path, "ab") as f:
                f.write(part)
            got += [n for _, n in cur.new_lines()]
    assert got == list(range(50))
