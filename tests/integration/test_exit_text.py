"""How a command ended, in every message (issue 12 run-fix item 3): never a raw ``None`` or ``-9``. The local
transport's children killed by a signal (real processes), and the wording for each case of ``exit_text``."""

from __future__ import annotations

import asyncio

import pytest

from orchestrator.errors import RemoteCommandError, exit_text
from orchestrator.transport.base import CommandResult
from orchestrator.transport.local import LocalTransport


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
