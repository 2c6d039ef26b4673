"""The ``orch`` command: the root Typer app, global options, and the one error boundary of the process."""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Annotated, Any

import typer

from orchestrator.cli import render
from orchestrator.cli.argcheck import numeric_options, refuse_foreign_digits, refuse_undecodable
from orchestrator.cli.context import AppContext
from orchestrator.cli.helpformat import unbroken_hyphens
from orchestrator.errors import OrchError, UsageError
from orchestrator.settings import Settings

app = typer.Typer(
    name="orch",
    help="Orchestrate GPU benchmarks across hosts: doctor, deploy, run suites, store and serve results.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,  # --install-completion / --show-completion; names come from cli/complete.py
    # click's own help layout: paragraphs rewrapped at the terminal's width, option names never cut; typer's rich
    # panels kept the docstrings' line breaks (mid-sentence at 80 columns) and cut --allreduces-per-layer
    rich_markup_mode=None,
)


def _show_version(value: bool) -> None:
    if value:
        from orchestrator.version import version_info

        for line in version_info().lines():
            typer.echo(line)
        raise typer.Exit()


INVENTORY_HELP = "Inventory YAML file (default: $ORCH_INVENTORY or ./inventory.yaml)."
DB_HELP = "Database URL (default: $ORCH_DB_URL or sqlite:///./orch.db)."
EXIT_CODES_HELP = "Exit status: 0 success; 1 a host or run failed; 2 usage or configuration error; 130 interrupted."


@app.callback(
    epilog="--db and --inventory may also follow the subcommand; given more than once (before and after it, or "
    f"twice), the last one counts. {EXIT_CODES_HELP}"
)
def root(
    ctx: typer.Context,
    inventory: Annotated[Path | None, typer.Option("--inventory", "-i", help=INVENTORY_HELP)] = None,
    db: Annotated[str | None, typer.Option("--db", help=DB_HELP)] = None,
    version: Annotated[
        bool,
        typer.Option("--version", is_eager=True, callback=_show_version,
                     help="Print orch's version, git commit, Python, asyncssh/SQLAlchemy versions, agent sha256."),
    ] = False,
) -> None:
    overrides: dict[str, object] = {}
    if inventory is not None:
        overrides["inventory"] = inventory
    if db is not None:
        overrides["db_url"] = db
    ctx.obj = AppContext(Settings(**overrides))  # type: ignore[arg-type]


GLOBAL_VALUE_OPTIONS = frozenset({"--db", "--inventory", "-i"})
_EXAMPLES = {"--db": "sqlite:///./orch.db", "--inventory": "inventory.yaml", "-i": "inventory.yaml"}


def hoist_global_options(argv: list[str], root: Any) -> list[str]:
    """``argv`` with the global options (``--db``, ``--inventory``/``-i``, with their values) that stand after the
    subcommand moved in front of it, so that ``orch run moe-sweep --hosts b300 --db URL`` means what
    ``orch --db URL run moe-sweep --hosts b300`` means. They go after the ones given before the subcommand, so
    the last one counts. Raises UsageError for one without its value.

    ``root`` is the click command tree of the app (``typer.main.get_command``). The walk follows it: a token that
    is the value of a subcommand's own option (``--label --db``) is never taken for a global option, nor is
    anything after ``--``, nor an option a subcommand defines itself. Pure: no I/O."""
    front: list[str] = []
    rest: list[str] = []
    cmd = root
    in_sub = False
    first_sub = 0
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            rest.extend(argv[i:])
            break
        name, eq, value = tok.partition("=")
        if in_sub and name in GLOBAL_VALUE_OPTIONS and _option(cmd, name) is None:
            if not eq and i + 1 == len(argv):
                raise UsageError(f"{name} needs a value", f"e.g. {name} {_EXAMPLES[name]}")
            front += [name, value] if eq else [tok, argv[i + 1]]
            i += 1 if eq else 2
            continue
        rest.append(tok)
        i += 1
        if tok.startswith("-") and tok != "-":
            opt = _option(cmd, name)
            if opt is not None and not eq and _takes_value(opt) and i < len(argv):
                rest.append(argv[i])
                i += 1
            continue
        sub = (getattr(cmd, "commands", None) or {}).get(tok)
        if sub is not None:
            if not in_sub:
                first_sub = len(rest) - 1
            cmd, in_sub = sub, True
    # After the root's own options, so that click's "the last value counts" makes a later --db win.
    return rest[:first_sub] + front + rest[first_sub:]


def _option(cmd: Any, name: str) -> Any:
    for p in getattr(cmd, "params", ()):
        if name in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ())) and name.startswith("-"):
            return p
    return None


def _takes_value(opt: Any) -> bool:
    return not (getattr(opt, "is_flag", False) or getattr(opt, "count", False) or getattr(opt, "nargs", 1) == 0)


def _register() -> None:
    from orchestrator.cli import doctor, fleet, hosts

    app.command("doctor")(doctor.doctor)
    app.command("fleet")(fleet.fleet)
    app.add_typer(hosts.app, name="hosts")

    from orchestrator.cli import run

    app.command("deploy")(run.deploy)
    app.command("run")(run.run)
    app.command("cancel")(run.cancel)

    from orchestrator.cli import regress

    app.command("calibrate")(regress.calibrate)

    from orchestrator.cli import suites

    app.add_typer(suites.app, name="suites")

    from orchestrator.cli import db, runs, serve

    app.add_typer(db.app, name="db")
    app.add_typer(runs.app, name="runs")
    app.command("serve")(serve.serve)

    from orchestrator.cli import project

    app.command("project")(project.project)


_register()


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app inside the one error boundary (OrchError -> red line + exit code)."""
    try:
        args = sys.argv[1:] if argv is None else argv
        refuse_undecodable(args)
        # The click command tree is built once (typer builds it from every command's signature: ~0.1 s);
        # calling `app(...)` would build it a second time. prog_name: _ORCH_COMPLETE also under python -m.
        cmd = typer.main.get_command(app)
        unbroken_hyphens(cmd)
        refuse_foreign_digits(args, numeric_options(cmd))
        rv = cmd.main(args=hoist_global_options(args, cmd), standalone_mode=False, prog_name="orch")
    except OrchError as exc:
        render.error(exc)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        if argv is None:  # the process's entry point: a command that closed its resources may skip the teardown
            from orchestrator.cli import fastexit

            fastexit.leave(exc.exit_code)
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
    code = rv if isinstance(rv, int) else 0  # click returns a command's typer.Exit code (standalone_mode=False)
    if argv is None:  # the process's entry point: a command that closed its resources may skip the teardown
        from orchestrator.cli import fastexit

        fastexit.leave(code)
    sys.exit(code)
