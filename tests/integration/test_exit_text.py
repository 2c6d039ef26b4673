"""How a command ended, in every message (issue 12 run-fix item 3): never a raw ``None`` or ``-9``. The local
transport's children killed by a signal (real processes), and the wording for each case of ``exit_text``."""

from __future__ import annotations

import asyncio

import pytest

from orchestrator.errors import RemoteCommandError, exit_text
from orchestrator.inventory import Host
from orchestrator.transport import open_transport
from orchestrator.transport.base import CommandResult, Transport
from orchestrator.transport.local import LocalTransport
from tests.plugins.sshd import SshdBed


@pytest.mark.parametrize(
    ("status", "signal", "text"),
    [(0, None, "exit status 0"), (3, None, "exit status 3"), (-9, None, "killed by signal KILL"),
     (-15, None, "killed by signal TERM"), (None, "KILL", "killed by signal KILL"),
     (None, None, "no exit status (its session was cut)"), (-200, None, "killed by signal 200")],
)  # fmt: skip
def test_exit_text(status: int | None, signal: str | None, text: str) -> None:
    assert exit_text(status, signal) == text


def test_remote_command_error_wording() -> None:
    assert RemoteCommandError("h", ["a", "b"], 3, "x\ny").message == "h: `a b` exited with status 3: x | y"
    assert RemoteCommandError("h", ["a"], -9, "").message == "h: `a` was killed by signal KILL"
    assert RemoteCommandError("h", ["a"], None, "", signal="TERM").message == "h: `a` was killed by signal TERM"
    cut = RemoteCommandError("h", ["a"], None, "")
    assert cut.message == "h: `a` ended without an exit status (its session was cut)"


@pytest.mark.parametrize(("status", "signal"), [(-9, None), (-1, "KILL"), (None, "KILL")])
def test_a_killed_command_has_no_exit_status_whatever_the_transport_said(status: int, signal: str | None) -> None:
    """A negative status is a signal, never a status callers compare: asyncssh reports -1 for any signal (with
    the name sshd sent), a local child -N. -1 read as a status was worded "killed by signal HUP" (signal 1), and
    the runner, seeing a status, failed a host whose follower alone was killed instead of following it again."""
    exc = RemoteCommandError("h", ["a"], status, "", signal=signal)
    assert (exc.exit_status, exc.signal, exc.message) == (None, "KILL", "h: `a` was killed by signal KILL")


async def _killed(t: Transport) -> tuple[RemoteCommandError, RemoteCommandError, RemoteCommandError]:
    """What ``t`` raises for a command killed by SIGKILL (run, and run with check=False) and one that printed a
    line and was then killed by SIGTERM (stream)."""
    errors = []
    for check in (True, False):
        with pytest.raises(RemoteCommandError) as ran:
            res = await t.run(["sh", "-c", "kill -KILL $$"], timeout_s=60, check=check)
            raise AssertionError(f"no error, a result: {res}")
        errors.append(ran.value)
    with pytest.raises(RemoteCommandError) as streamed:
        async for _ in t.stream(["sh", "-c", "echo one; echo why >&2; kill -TERM $$"]):
            pass
    return errors[0], errors[1], streamed.value


@pytest.mark.sshd
async def test_ssh_command_killed_by_a_signal_is_named_not_read_as_status_minus_one(sshd_bed: SshdBed) -> None:
    h = sshd_bed.add("gpu-a")
    t = await open_transport(Host(name="gpu-a", group="g", address=h.address, port=h.port), timeout_s=30)
    try:
        ran, unchecked, streamed = await _killed(t)
    finally:
        await t.close()
    assert (ran.exit_status, ran.signal) == (None, "KILL")
    assert ran.message == "gpu-a: `sh -c kill -KILL $$` was killed by signal KILL"
    assert (unchecked.exit_status, unchecked.signal) == (None, "KILL")
    assert (streamed.exit_status, streamed.signal) == (None, "TERM")
    assert streamed.message == "gpu-a: `sh -c echo one; echo why >&2; kill -TERM $$` was killed by signal TERM: why"


def test_local_child_killed_by_a_signal_is_named() -> None:
    t = LocalTransport("local")

    async def go() -> tuple[str, str, str]:
        with pytest.raises(RemoteCommandError) as ran:
            await t.run(["sh", "-c", "kill -KILL $$"], timeout_s=60)
        with pytest.raises(RemoteCommandError) as streamed:
            async for _ in t.stream(["sh", "-c", "echo one; kill -TERM $$"]):
                pass
        res = await t.run(["sh", "-c", "kill -KILL $$"], timeout_s=60, check=False)
        with pytest.raises(ValueError) as doc:
            CommandResult(res.argv, res.exit_status, "", "", 0.0).json_object()
        return ran.value.message, streamed.value.message, str(doc.value)

    ran, streamed, doc = asyncio.run(go())
    assert ran == "local: `sh -c kill -KILL $$` was killed by signal KILL"
    assert streamed == "local: `sh -c echo one; kill -TERM $$` was killed by signal TERM"
    assert doc == "killed by signal KILL"
