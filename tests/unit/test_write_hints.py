"""The fix named for the agent's ``cannot write PATH: <strerror>`` follows the cause (variant tester, session 5):
a read-only or missing orch_home was told to "free space on the host"."""

from __future__ import annotations

import errno
import os

import pytest

from orchestrator.agentctl import write_hint


@pytest.mark.parametrize(
    ("code", "fix"),
    [(errno.ENOSPC, "free space on the host"), (errno.EDQUOT, "free space in the user's quota"),
     (errno.EROFS, "that filesystem is read-only on the host"), (errno.EACCES, "the SSH user cannot write there"),
     (errno.ENOENT, "a directory on that path does not exist on the host"), (errno.EIO, "check the device")],
)  # fmt: skip
def test_each_cause_gets_its_own_fix(code: int, fix: str) -> None:
    error = f"cannot write /data/o/runs/r/h/events.jsonl: {os.strerror(code)}"  # as the agent words it
    hint = write_hint(error)
    assert hint.startswith(fix) and "orch_home:" in hint
    assert ("free space" in hint) == (code in (errno.ENOSPC, errno.EDQUOT))


def test_the_agent_s_spool_read_error_is_the_host_s_error() -> None:
    """``follow``/``status`` exit 5 with ``read_failed`` (agent spool.py SpoolReadError): orch shows the agent's
    message, naming the path and the errno, as the host's error, with the fix by cause; never a traceback."""
    from orchestrator.agentctl import spool_io_error
    from orchestrator.inventory import Host

    eio = "cannot read /data/o/runs/r/h/events.jsonl: Input/output error (EIO)"
    err = spool_io_error(Host(name="h", group="g"), {"error": eio, "code": "read_failed"}, "fallback")
    assert err.host == "h" and eio in str(err) and "check the device" in err.hint
    fifo = "cannot read /data/o/runs/r/h/events.jsonl: it is a FIFO, not a regular file"
    assert "only the agent may" in spool_io_error(Host(name="h", group="g"), {"error": fifo}, "x").hint
    assert "fallback" in str(spool_io_error(Host(name="h", group="g"), {}, "fallback"))
