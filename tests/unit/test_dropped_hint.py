"""runner._dropped: a dropped connection that ends a host says what state the host may be in and the exact way
on; any other error is left as it is."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from orchestrator.errors import ConnectError, HostError
from orchestrator.runner import _dropped

RUN = "01a22cce-123d-7432-b20d-4202f905f6cd"


def _hr(started: bool) -> Any:
    return SimpleNamespace(started=started, host=SimpleNamespace(name="h9"))


def test_started_host_names_the_resume() -> None:
    exc = ConnectError("h9", "closed", "the SSH session dropped while `python agent.pyz start` ran: no exit status "
                       "came back")  # fmt: skip
    out = _dropped(exc, _hr(True), RUN)
    assert out.message == ("h9: the SSH session dropped while `python agent.pyz start` ran: no exit status came "
                           "back; its agent was started and may still run there")  # fmt: skip
    assert out.hint == "go on with: orch run --resume f905f6cd"


def test_host_that_never_started_says_so() -> None:
    out = _dropped(ConnectError("h9", "closed", "connection lost while running python"), _hr(False), RUN)
    assert out.message == "h9: connection lost while running python; nothing was started there"
    assert out.hint == ("start it again: orch run --resume f905f6cd when the run was stored, "
                        "else the same orch run")  # fmt: skip


def test_other_errors_are_left_alone() -> None:
    refused = ConnectError("h9", "refused", "connection refused")
    assert _dropped(refused, _hr(True), RUN) is refused
    other = HostError("h9", "GPUs busy")
    assert _dropped(other, _hr(False), RUN) is other
