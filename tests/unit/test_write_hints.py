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
