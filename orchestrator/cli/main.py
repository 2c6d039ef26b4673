"""The ``orch`` command: the root Typer app, global options, and the one error boundary of the process."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli import render
from orchestrator.cli.context import AppContext
from orchestrator.errors import OrchError
from orchestrator.settings import Settings

app = typer.Typer(
    name="orch",
    help="Orchestrate GPU benchmarks across hosts: doctor, deploy, run suites, store and serve results.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def root(
    ctx: typer.Context,
    inventory: Annotated[
        Path | None,
        typer.Option("--inventory", "-i", help="Inventory YAML file (default: $ORCH_INVENTORY or ./inventory.yaml)."),
    ] = None,
    db: Annotated[
        str | None,
        typer.Option("--db", help="Database URL (default: $ORCH_DB_URL or sqlite:///./orch.db)."),
    ] = None,
) -> None:
    overrides: dict[str, object] = {}
    if inventory is not None:
        overrides["inventory"] = inventory
    if db is not None:
        overrides["db_url"] = db
    ctx.obj = AppContext(Settings(**overrides))  # type: ignore[arg-type]


def _register() -> None:
    from orchestrator.cli import doctor, hosts

    app.command("doctor")(doctor.doctor)
    app.add_typer(hosts.app, name="hosts")

    from orchestrator.cli import run

    app.command("deploy")(run.deploy)
    app.command("run")(run.run)
    app.command("cancel")(run.cancel)

    from orchestrator.cli import suites

    app.add_typer(suites.app, name="suites")

    from orchestrator.cli import db, runs, serve

    app.add_typer(db.app, name="db")
    app.add_typer(runs.app, name="runs")
    app.command("serve")(serve.serve)


_register()


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app inside the one error boundary (OrchError -> red line + exit code)."""
    try:
        rv = app(args=argv, standalone_mode=False)
    except OrchError as exc:
        render.error(exc)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        render.err_console().print("[red]Aborted.[/red]")
        sys.exit(130)
    except KeyboardInterrupt:
        render.err_console().print("[red]Interrupted.[/red]")
        sys.exit(130)
    except SystemExit:
        raise
    except typer.TyperException as exc:  # usage errors (typer vendors click: its exceptions derive from this)
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            render.err_console().print(f"[red]error:[/red] {exc}")
        sys.exit(int(getattr(exc, "exit_code", 2)))
    except Exception as exc:  # plain click's usage errors (older typer), else a real bug
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        traceback.print_exc()
        render.err_console().print(
            "[red]orch hit a bug.[/red] Please report it with the traceback above and the command you ran."
        )
        sys.exit(70)
    sys.exit(rv if isinstance(rv, int) else 0)
