"""Whole lines and positions (pure): the splitter the transports use, and seq checked against position."""

from __future__ import annotations

import json
import random

import pytest

from orchestrator.ingest import done_record, host_verdict, line_event, reconcile
from orchestrator.protocol import Event, parse_line
from orchestrator.transport.lines import HEAD_BYTES, LineSplitter, OversizeLine


def _split(data: bytes, cap: int, chunk_sizes: list[int]) -> list[bytes | OversizeLine]:
    sp = LineSplitter(cap)
    out: list[bytes | OversizeLine] = []
    pos = 0
    for n in chunk_sizes:
        out += sp.feed(data[pos : pos + n])
        pos += n
    out += sp.feed(data[pos:])
    return out


@pytest.mark.parametrize("seed", range(20))
def test_any_chunking_gives_the_same_whole_lines(seed: int) -> None:
    rng = random.Random(seed)
    lines = [bytes(rng.choice(b"ab{}") for _ in range(rng.choice([0, 1, 5, 299, 300, 301, 2000]))) for _ in range(30)]
    data = b"".join(line + b"\n" for line in lines)
    cuts = [rng.choice([1, 2, 7, 100, 4096]) for _ in range(len(data) // 50)]
    got = _split(data, 300, cuts)
    want = [line if len(line) <= 300 else OversizeLine(len(line), line[:HEAD_BYTES]) for line in lines]
    assert got == want


def test_a_line_at_the_cap_is_whole_and_one_byte_more_is_one_oversize_line() -> None:
    sp = LineSplitter(10)
    assert sp.feed(b"0123456789\n") == [b"0123456789"]
    assert sp.feed(b"01234") == [] and sp.pending == 5
    assert sp.feed(b"56789A") == [] and sp.pending == 11  # past the cap: counted, no longer held
    assert sp.feed(b"BC\nnext\n") == [OversizeLine(13, b"0123456789ABC"), b"next"]
    assert sp.pending == 0


def test_an_unfinished_last_line_is_never_yielded() -> None:
    sp = LineSplitter(100)
    assert sp.feed(b'{"seq":0}\n{"seq":1,"ty') == [b'{"seq":0}']
    assert sp.pending == len(b'{"seq":1,"ty')  # held until its newline; dropped with the splitter at the end


def test_seq_is_the_position_a_mismatch_is_an_error_at_the_position() -> None:
    good = parse_line('{"v":1,"seq":4,"type":"result","case":{"M":8},"metrics":{}}', expected_seq=4)
    assert (good.seq, good.type) == (4, "result")
    for claimed in (100004, 3, 5):  # a jump, a duplicate of the previous line, a gap
        line = json.dumps({"v": 1, "seq": claimed, "type": "result", "case": {"M": 8}, "metrics": {}})
        ev = parse_line(line, expected_seq=4)
        assert ev.seq == 4 and ev.type == "error" and ev.data["kind"] == "protocol"
        assert f"agent line 4 (result) claims seq {claimed}" in ev.data["message"]
        assert ev.case == {"M": 8} and ev.data["line_type"] == "result"


def test_oversize_line_is_one_error_naming_position_claimed_seq_and_size() -> None:
    ev = line_event(OversizeLine(70_000_000, b'{"v":1,"seq":7,"type":"result","case":'), 7, cap=64 * 2**20)
    assert ev.seq == 7 and ev.type == "error" and ev.data["line_bytes"] == 70_000_000
    assert ev.data["message"].startswith("agent line 7 (claiming seq 7) is 70,000,000 bytes, over orch's cap")
    assert line_event(b'{"v":1,"seq":7,"type":"log","message":"x"}', 7).type == "log"


def _done(counts: dict[str, object], seq: int, status: str = "completed") -> dict[str, object]:
    return done_record(Event(seq=seq, type="done", data={"status": status, "counts": counts}))


def test_reconcile_and_verdicts() -> None:
    done = _done({"lines": 8, "results": 6, "errors": 0}, 8)
    assert done == {"lines": 8, "results": 6, "errors": 0, "status": "completed", "position": 8}
    assert reconcile(done, done_seq=8, results=6, errors=0) == []
    assert host_verdict(done, results=6, errors=0).status == "completed"
    assert reconcile(done, done_seq=8, results=5, errors=1) == [
        "6 results on the host, 5 stored",
        "0 errors on the host, 1 stored",
    ]
    v = host_verdict(done, results=5, errors=1)
    assert (v.status, v.stored_status) == ("failed", "failed") and "6 results on the host, 5 stored" in (v.error or "")
    assert reconcile(_done({"lines": True, "results": 6, "errors": 0}, 8), done_seq=8, results=6, errors=0)
    assert host_verdict(_done({"results": 6, "errors": 0}, 8), results=6, errors=0).status == "completed"
    partial = host_verdict(_done({"lines": 8, "results": 5, "errors": 1}, 8), results=5, errors=1)
    assert (partial.status, partial.stored_status, partial.error) == ("partial", "completed", "1 case failed")
    assert host_verdict(_done({}, 3, "cancelled"), results=0, errors=0).status == "cancelled"
    assert host_verdict(None, results=3, errors=0).status == "failed"
