"""``cli.main.app_for``: ``orch run ...`` parses with an app holding the run command alone (its module the only
command module imported); root help, a mistyped command and shell completion get every command."""

from __future__ import annotations

import pytest
import typer

from orchestrator.cli import main as cli_main

ALL = [name for name, *_ in cli_main.COMMANDS]


def _commands(app: typer.Typer) -> list[str]:
    return sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "echo", "--hosts", "h"], ["run"]),
        (["--db", "sqlite:///x.db", "-i", "inv.yaml", "runs", "list"], ["runs"]),
        (["--db=sqlite:///x.db", "--inventory=inv.yaml", "doctor"], ["doctor"]),
        (["-iinv.yaml", "hosts", "list"], ["hosts"]),
        (["--db", "run", "deploy"], ["deploy"]),  # "run" is --db's value here, not the command
    ],
)
def test_a_named_command_gets_an_app_holding_it_alone(args: list[str], expected: list[str]) -> None:
    assert _commands(cli_main.app_for(args)) == expected


@pytest.mark.parametrize(
    "args",
    [[], ["--help"], ["--help", "run"], ["--version"], ["rn", "echo"], ["--", "run"], ["--install-completion"]],
)
def test_anything_else_gets_every_command(args: list[str]) -> None:
    assert _commands(cli_main.app_for(args)) == sorted(ALL)


def test_shell_completion_gets_every_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("_ORCH_COMPLETE", "bash_complete")
    assert _commands(cli_main.app_for(["run"])) == sorted(ALL)


def test_the_module_app_is_the_full_app() -> None:
    from orchestrator.cli.main import app

    assert app is cli_main.full_app() and _commands(app) == sorted(ALL)
