"""Is a streaming command still alive? Its output on either stream, heartbeats included, says so — pure.

The agent's follower (``agent start --follow``, ``agent follow``) prints spool lines on stdout only when the
worker writes some, which may be minutes apart; with ``--heartbeat-s S`` it also writes the line
:data:`HEARTBEAT` to stderr every S seconds while it waits (agents/orch_agent/cli.py). A follower that is
SIGSTOPped, blocked in a write that never completes, or wedged in any other way says nothing on either stream,
while sshd still answers keepalives and the worker still writes its spool: without this check orch waited on it
without end. The transports (``ssh.py``, ``local.py``) keep a :class:`Liveness` per stream and end one that has
been silent for its limit; :class:`StderrTail` keeps the heartbeats out of the stderr text that error messages show.

:func:`heartbeat_interval_s`: the follower beats ``HEARTBEATS_PER_LIMIT`` times per limit, so a live follower
delayed by a loaded machine (a 2-core box at load 10 still schedules a runnable process within a fraction of a
second) cannot miss that many beats in a row; only a follower that really does not run can.
"""

from __future__ import annotations

HEARTBEAT = b"#orch-heartbeat"
"""The follower's heartbeat line on stderr: these bytes, optionally followed by `` pid=PID`` (the follower's own
pid, which orch needs to kill it on the host when it goes silent); the agent's ``cli.HEARTBEAT`` is the same."""

HEARTBEATS_PER_LIMIT = 10  # beats the follower sends per silence limit: a live one misses all of them only if stopped
MIN_HEARTBEAT_S = 0.1  # no busier than this, whatever the limit
MAX_HEARTBEAT_S = 5.0  # and no sparser: a long limit still hears from a live follower often
STDERR_TAIL_BYTES = 64 * 1024  # stderr kept for error messages: the agent's error document is its last line


def heartbeat_interval_s(silent_limit_s: float) -> float:
    """Seconds between the follower's heartbeats for a silence limit of ``silent_limit_s`` s: a tenth of it,
    within [0.1, 5] s. Raises ValueError for a limit that is not > 0."""
    if not silent_limit_s > 0:
        raise ValueError(f"the silence limit must be > 0 s, not {silent_limit_s!r}")
    return min(MAX_HEARTBEAT_S, max(MIN_HEARTBEAT_S, silent_limit_s / HEARTBEATS_PER_LIMIT))


class Liveness:
    """When a stream's command last showed it is alive, on the monotonic clock (s).

    ``heard(now)``: it said something (a chunk of stdout, a heartbeat), or the reader starts to wait for it again
    after time spent elsewhere (handing lines on to a consumer that blocked): the command cannot be blamed for
    silence while nobody read its output — a follower blocked on a full pipe because orch did not read is alive.
    ``silent_for(now)``: seconds of silence that count against it. Time never goes back (``max``).
    """

    def __init__(self, now: float) -> None:
        self.last = now

    def heard(self, now: float) -> None:
        self.last = max(self.last, now)

    def silent_for(self, now: float) -> float:
        return max(0.0, now - self.last)

    def remaining(self, limit_s: float, now: float) -> float:
        """Seconds left before ``limit_s`` of silence (0 when past it)."""
        return max(0.0, limit_s - self.silent_for(now))


def parse_heartbeat(line: bytes) -> tuple[bool, int | None]:
    """For one stderr line (newline excluded): whether it is a heartbeat, and the pid it names (None if none)."""
    line = line.rstrip(b"\r")
    if line == HEARTBEAT:
        return True, None
    if not line.startswith(HEARTBEAT + b" "):
        return False, None
    for field in line[len(HEARTBEAT) + 1 :].split():
        key, _, value = field.partition(b"=")
        if key == b"pid" and value.isdigit() and 0 < len(value) < 10:
            return True, int(value)
    return True, None


class StderrTail:
    """A command's stderr as it streams in, cut into lines: heartbeats counted and dropped, the rest kept (the
    last ``STDERR_TAIL_BYTES``) for error messages. ``feed(chunk)`` returns how many heartbeats the chunk
    completed; ``text()`` is what the command wrote besides them (a last line without its newline included);
    ``pid`` the pid the last heartbeat named."""

    def __init__(self, keep_bytes: int = STDERR_TAIL_BYTES) -> None:
        self.keep_bytes = keep_bytes
        self._partial = bytearray()
        self._kept = bytearray()
        self.heartbeats = 0
        self.pid: int | None = None

    def feed(self, chunk: bytes) -> int:
        beats = 0
        self._partial += chunk
        *whole, rest = bytes(self._partial).split(b"\n")
        self._partial = bytearray(rest)
        for line in whole:
            beat, pid = parse_heartbeat(line)
            if beat:
                beats += 1
                self.pid = pid if pid is not None else self.pid
            else:
                self._kept += line + b"\n"
        if len(self._kept) > self.keep_bytes:
            del self._kept[: len(self._kept) - self.keep_bytes]
        if len(self._partial) > self.keep_bytes:  # a runaway line without newline: keep its tail only
            self._kept += self._partial[: len(self._partial) - self.keep_bytes]
            del self._partial[: len(self._partial) - self.keep_bytes]
            del self._kept[: max(0, len(self._kept) - self.keep_bytes)]
        self.heartbeats += beats
        return beats

    def text(self) -> str:
        rest = bytes(self._partial)
        tail = bytes(self._kept) + (b"" if parse_heartbeat(rest)[0] else rest)
        return tail.decode("utf-8", "replace")
