"""Both transports hand over whole lines of any length up to the cap, and one OversizeLine past it (real sshd,
real subprocesses). Before: the local transport failed a host on a line over 64 KiB (asyncio's StreamReader
limit) and SSH cut lines over ~2 MiB (asyncssh's receive window) into pieces taken for lines."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from orchestrator.inventory import Host
from orchestrator.transport import open_transport
from orchestrator.transport.base import Transport
from orchestrator.transport.lines import MAX_LINE_BYTES, Line, OversizeLine
from orchestrator.transport.local import LocalTransport
from tests.plugins.sshd import SshdBed

# small, 10 MB, exactly the cap, one byte past it, small; the last line lacks its newline (left out)
PRINTER = """\
import sys
out = sys.stdout.buffer
for n in (10, 10_000_000, CAP, CAP + 1, 3):
    out.write(b"{" + b"x" * (n - 2) + b"}\\n")
out.write(b"{half")
"""


async def _collect(t: Transport) -> list[Line]:
    argv = [sys.executable, "-c", PRINTER.replace("CAP", str(MAX_LINE_BYTES))]
    return [line async for line in t.stream(argv)]


def _check(lines: list[Line]) -> None:
    assert [len(x) if isinstance(x, bytes) else x.size for x in lines] == [
        10, 10_000_000, MAX_LINE_BYTES, MAX_LINE_BYTES + 1, 3
    ]
    assert all(isinstance(x, bytes) for i, x in enumerate(lines) if i != 3)
    big, over = lines[1], lines[3]
    assert isinstance(big, bytes) and big == b"{" + b"x" * (10_000_000 - 2) + b"}"
    assert isinstance(over, OversizeLine) and over.head.startswith(b"{xxx")


async def test_local_transport_takes_long_lines_whole(tmp_path: Path) -> None:
    _check(await _collect(LocalTransport("local", home=tmp_path)))


@pytest.mark.sshd
async def test_ssh_transport_takes_long_lines_whole(sshd_bed: SshdBed) -> None:
    h = sshd_bed.add("gpu-a")
    t = await open_transport(Host(name="gpu-a", group="g", address=h.address, port=h.port), timeout_s=30)
    try:
        _check(await _collect(t))
    finally:
        await t.close()
