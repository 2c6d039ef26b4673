"""The follower's liveness rules (``transport/liveness.py``): heartbeat interval, silence clock, stderr tail."""

from __future__ import annotations

import pytest

from orchestrator.transport.liveness import (
    HEARTBEAT,
    Liveness,
    StderrTail,
    heartbeat_interval_s,
    parse_heartbeat,
)


@pytest.mark.parametrize(
    ("limit", "beat"),
    [(60.0, 5.0), (300.0, 5.0), (10.0, 1.0), (20.0, 2.0), (0.5, 0.1), (0.01, 0.1)],
)
def test_heartbeat_interval_is_a_tenth_of_the_limit_within_bounds(limit: float, beat: float) -> None:
    assert heartbeat_interval_s(limit) == pytest.approx(beat)


@pytest.mark.parametrize("limit", [0.0, -1.0, float("nan")])
def test_heartbeat_interval_refuses_a_limit_that_is_not_positive(limit: float) -> None:
    with pytest.raises(ValueError, match="must be > 0 s"):
        heartbeat_interval_s(limit)


def test_liveness_counts_silence_from_the_last_sign_and_never_goes_back() -> None:
    live = Liveness(100.0)
    assert live.silent_for(103.5) == pytest.approx(3.5)
    assert live.remaining(10.0, 103.5) == pytest.approx(6.5)
    live.heard(105.0)
    assert live.silent_for(106.0) == pytest.approx(1.0)
    live.heard(104.0)  # an older sign does not move the clock back
    assert live.silent_for(106.0) == pytest.approx(1.0)
    assert live.remaining(10.0, 200.0) == 0.0
    assert live.silent_for(99.0) == 0.0


def test_stderr_tail_counts_heartbeats_and_keeps_everything_else() -> None:
    tail = StderrTail()
    assert tail.feed(HEARTBEAT + b"\n" + HEARTBEAT[:5]) == 1
    assert tail.feed(HEARTBEAT[5:] + b"\nwarn: x\n" + HEARTBEAT + b"\r\n") == 2  # split across chunks, and CRLF
    assert tail.feed(b'{"error": "agent worker exited without finishing", "code": "worker_dead"}') == 0
    assert tail.heartbeats == 3
    assert tail.text() == 'warn: x\n{"error": "agent worker exited without finishing", "code": "worker_dead"}'


def test_stderr_tail_drops_an_unfinished_heartbeat_and_keeps_only_the_last_bytes() -> None:
    tail = StderrTail(keep_bytes=16)
    tail.feed(b"a" * 10 + b"\n" + b"b" * 10 + b"\n" + HEARTBEAT)
    assert tail.text() == "aaaa\n" + "b" * 10 + "\n"  # the last 16 bytes of the kept lines; the beat dropped
    tail.feed(b"\n" + b"c" * 40)  # a runaway line without newline: bounded too
    assert len(tail.text()) <= 32 and tail.text().endswith("c" * 16)


@pytest.mark.parametrize(
    ("line", "parsed"),
    [
        (HEARTBEAT, (True, None)),
        (HEARTBEAT + b" pid=4242", (True, 4242)),
        (HEARTBEAT + b" pid=4242\r", (True, 4242)),
        (HEARTBEAT + b" x=1 pid=7", (True, 7)),
        (HEARTBEAT + b" pid=-3", (True, None)),
        (HEARTBEAT + b" pid=12345678901", (True, None)),  # not a pid Linux hands out (pid_max <= 2**22)
        (HEARTBEAT + b"x pid=1", (False, None)),
        (b"warn: " + HEARTBEAT, (False, None)),
        (b'{"error": "x"}', (False, None)),
    ],
)
def test_parse_heartbeat(line: bytes, parsed: tuple[bool, int | None]) -> None:
    assert parse_heartbeat(line) == parsed


def test_stderr_tail_remembers_the_pid_of_the_last_heartbeat_that_named_one() -> None:
    tail = StderrTail()
    tail.feed(HEARTBEAT + b" pid=10\n" + HEARTBEAT + b"\n")
    assert tail.pid == 10 and tail.heartbeats == 2
    tail.feed(HEARTBEAT + b" pid=11\n")
    assert tail.pid == 11 and tail.text() == ""
