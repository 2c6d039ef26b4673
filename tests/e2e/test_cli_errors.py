"""The CLI's error boundary through the real ``orch`` process: usage errors are a message and exit 2 (never a
traceback), reading commands never create an empty database, finished runs are not rewritten by cancel/resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.e2e.conftest import Orch


@pytest.fixture
def local(tmp_path: Path) -> Orch:
    inv = tmp_path / "inventory.yaml"
    inv.write_text("groups:\n  local:\n    hosts:\n      localhost: {connection: local}\n")
    return Orch(inv, f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("run", "moe-sweep", "--hosts", "local", "--repeat", "0"), "--repeat"),
        (("run", "moe-sweep", "--hosts", "local", "--repeat", "abc"), "--repeat"),
        (("doctor", "--timeout", "0"), "--timeout"),
        (("serve", "--port", "99999"), "--port"),
        (("runs", "compare", "abc"), "head"),
        (("nosuchcmd",), "No such command"),
        (("run", "moe-sweep", "--bogus"), "--bogus"),
    ],
)
def test_usage_errors_are_messages_not_tracebacks(local: Orch, args: tuple[str, ...], expected: str) -> None:
    res = local(*args)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and "hit a bug" not in res.stderr
    assert expected in res.stderr


def test_reading_commands_do_not_create_an_empty_database(local: Orch) -> None:
    res = local("runs", "list")
    assert res.returncode == 2  # a configuration error (exit-code contract: 2)
    assert "no orch database at" in res.stderr and "--db" in res.stderr
    assert not (local.cwd / "orch.db").exists()


def test_cancel_and_resume_leave_a_finished_run_alone(local: Orch) -> None:
    done = local.json("run", "noop", "--hosts", "local")
    assert done["status"] == "completed"
    before = local.json("runs", "show", done["run_id"])["run"]
    for args in (("cancel", done["run_id"]), ("run", "--resume", done["run_id"])):
        res = local(*args)
        assert res.returncode == 2, res.stdout + res.stderr
        assert "already finished (completed)" in res.stderr
    after = local.json("runs", "show", done["run_id"])["run"]
    assert (after["status"], after["finished_at"]) == (before["status"], before["finished_at"])
    assert json.dumps(after["params"]) == json.dumps(before["params"])
