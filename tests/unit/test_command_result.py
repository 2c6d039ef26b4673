"""``CommandResult.json_object``: how orch reads the answers of its remote scripts and of the agent."""

from __future__ import annotations

import pytest

from orchestrator.transport.base import CommandResult


def res(stdout: str, stderr: str = "", status: int | None = 0) -> CommandResult:
    return CommandResult(("python3", "-c", "..."), status, stdout, stderr, 0.01)


def test_last_line_object_is_the_answer() -> None:
    assert res('progress\n{"agent": "present", "home": "/root"}\n').json_object() == {
        "agent": "present", "home": "/root"}  # fmt: skip


@pytest.mark.parametrize(
    ("result", "why"),
    [
        (res('{"error": "RuntimeError: disk full", "code": "x"}', status=1), "RuntimeError: disk full"),
        (res('{"error": "uploaded build is corrupt"}', status=0), "uploaded build is corrupt"),
        (res("", "Traceback ...\nModuleNotFoundError: No module named 'json'", status=1),
         "ModuleNotFoundError: No module named 'json'"),
        (res("not json", "", status=127), "exit status 127"),
        (res("{}", "", status=0), "exit status 0"),
        (res('{"ok": true}', "killed", status=None), "killed"),
    ],
)  # fmt: skip
def test_no_answer_says_why(result: CommandResult, why: str) -> None:
    with pytest.raises(ValueError) as exc:
        result.json_object()
    assert str(exc.value) == why
