"""A streaming command that goes silent — stopped, or wedged — is ended by the transport, on real sshd and on the
local transport alike (``silent_s`` of ``Transport.stream``, ``transport/watch.py``). Before, orch waited on a
SIGSTOPped agent follower without end: sshd still answered keepalives, and nothing else has a deadline there.

The commands here are small Python programs that behave as the agent's follower does: a line on stdout, then
heartbeats on stderr only (alive, with nothing to print) for longer than the limit, then silence."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from orchestrator.errors import CommandSilent, RemoteCommandError
from orchestrator.inventory import Host
from orchestrator.transport import open_transport
from orchestrator.transport.base import Transport
from orchestrator.transport.liveness import HEARTBEAT
from orchestrator.transport.local import LocalTransport
from tests.plugins.sshd import SshdBed
from tests.plugins.timing import wait_for

# 6 s of silence ends it; the heartbeat-only phase lasts 10 s at a beat every 0.1 s: a live command would have to
# miss 60 beats in a row to be taken for silent, which a loaded machine does not do to a runnable process.
SILENT_S = 6.0
BEATS = 100

STOPPER = f"""\
import os, signal, sys, time
sys.stdout.write(str(os.getpid()) + "\\n"); sys.stdout.flush()
for _ in range({BEATS}):
    sys.stderr.buffer.write({HEARTBEAT!r} + b" pid=%d\\n" % os.getpid()); sys.stderr.flush(); time.sleep(0.1)
sys.stderr.write("not a heartbeat\\n"); sys.stderr.flush()
os.kill(os.getpid(), signal.SIGSTOP)
"""

FAILER = f"""\
import sys, time
sys.stdout.write("one\\n"); sys.stdout.flush()
for _ in range(5):
    sys.stderr.buffer.write({HEARTBEAT!r} + b"\\n"); sys.stderr.flush(); time.sleep(0.05)
sys.stderr.write('{{"error": "the real reason", "code": "worker_dead"}}\\n')
sys.exit(3)
"""


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


async def _stopped_is_ended(t: Transport) -> int:
    """The stopped command ends the stream with CommandSilent naming its pid (from its heartbeats), only after
    its heartbeats stopped; returns the pid."""
    lines: list[bytes] = []
    t0 = time.monotonic()
    with pytest.raises(CommandSilent) as info:
        async for line in t.stream([sys.executable, "-c", STOPPER], silent_s=SILENT_S):
            assert isinstance(line, bytes)
            lines.append(line)
    waited = time.monotonic() - t0
    assert info.value.kind == "silent", info.value
    assert len(lines) == 1 and lines[0].isdigit(), lines
    pid = int(lines[0])
    assert info.value.pid == pid and f"(pid {pid}) said nothing for {SILENT_S:g} s" in info.value.message
    assert waited >= BEATS * 0.1 + SILENT_S - 1, f"ended after {waited:.1f} s: its heartbeats were not heard"
    return pid


def _killed(pid: int) -> None:
    try:
        wait_for(lambda: not _alive(pid), timeout_s=30, what=f"the stopped command (pid {pid}) to be killed")
    finally:
        if _alive(pid):  # clean up after a failure: never leave a stopped process behind
            os.kill(pid, signal.SIGKILL)


async def _heartbeats_stay_out_of_errors(t: Transport) -> None:
    with pytest.raises(RemoteCommandError) as info:
        async for _ in t.stream([sys.executable, "-c", FAILER], silent_s=SILENT_S):
            pass
    assert info.value.exit_status == 3
    assert info.value.stderr == '{"error": "the real reason", "code": "worker_dead"}\n'


async def test_local_stream_ends_a_stopped_command_and_kills_it(tmp_path: Path) -> None:
    _killed(await _stopped_is_ended(LocalTransport("local", home=tmp_path)))


async def test_local_stream_keeps_heartbeats_out_of_its_errors(tmp_path: Path) -> None:
    await _heartbeats_stay_out_of_errors(LocalTransport("local", home=tmp_path))


async def _ssh(sshd_bed: SshdBed) -> Transport:
    h = sshd_bed.add("gpu-a")
    return await open_transport(Host(name="gpu-a", group="g", address=h.address, port=h.port), timeout_s=30)


@pytest.mark.sshd
async def test_ssh_stream_ends_a_stopped_command_naming_its_pid(sshd_bed: SshdBed) -> None:
    """Over SSH the pid is what the caller kills it by (the runner's ``agent stop-follower``, tested end to end in
    tests/e2e/test_worker_signals.py): sshd refuses signal requests on root logins, as the test bed's are."""
    t = await _ssh(sshd_bed)
    pid = None
    try:
        pid = await _stopped_is_ended(t)
    finally:
        await t.close()
        if pid is not None and _alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.sshd
async def test_ssh_stream_keeps_heartbeats_out_of_its_errors(sshd_bed: SshdBed) -> None:
    t = await _ssh(sshd_bed)
    try:
        await _heartbeats_stay_out_of_errors(t)
    finally:
        await t.close()
