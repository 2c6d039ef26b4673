"""The ``orch`` command: the root Typer app, global options, and the one error boundary of the process."""

from __future__ import annotations

import os
import sys
import traceback
from functools import cache
from pathlib import Path
from typing import Annotated, Any

import typer

from orchestrator.cli import render
from orchestrator.cli.argcheck import numeric_options, refuse_foreign_digits, refuse_undecodable
from orchestrator.cli.context import AppContext
from orchestrator.cli.helpformat import unbroken_hyphens
from orchestrator.errors import OrchError, UsageError
from orchestrator.settings import Settings

_APP_OPTIONS: dict[str, Any] = {
    "name": "orch",
    "help": "Orchestrate GPU benchmarks across hosts: doctor, deploy, run suites, store and serve results.",
    "no_args_is_help": True,
    "pretty_exceptions_enable": False,
    "add_completion": True,  # --install-completion / --show-completion; names come from cli/complete.py
    # click's own help layout: paragraphs rewrapped at the terminal's width, option names never cut; typer's rich
    # panels kept the docstrings' line breaks (mid-sentence at 80 columns) and cut --allreduces-per-layer
    "rich_markup_mode": None,
}


def _show_version(value: bool) -> None:
    if value:
        from orchestrator.version import version_info

        for line in version_info().lines():
            typer.echo(line)
        raise typer.Exit()


INVENTORY_HELP = (
    "Inventory YAML file (default: $ORCH_INVENTORY or ./inventory.yaml); -i PATH, -iPATH and -i=PATH alike, "
    "before or after the subcommand."
)
DB_HELP = "Database URL (default: $ORCH_DB_URL or sqlite:///./orch.db)."
EXIT_CODES_HELP = (
    "Exit status: 0 success; 1 a host or run failed; 2 usage or configuration error; 130 interrupted; killed by "
    "SIGPIPE (141) when the reader of its output went away."
)


ROOT_EPILOG = (
    "--db and --inventory may also follow the subcommand; given more than once (before and after it, or "
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
        if _attached_inventory(tok):  # -iPATH (click's attached short option) or -i=PATH, before or after it
            name, eq, value = "-i", "=", tok[3:] if tok[2] == "=" else tok[2:]
        if not in_sub and name == "-i" and eq:  # -i=PATH before the subcommand: PATH, as after it (not "=PATH")
            rest += ["-i", value]
            i += 1
            continue
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


def _attached_inventory(tok: str) -> bool:
    """``-iPATH``: the short inventory option with its value attached (click reads it so before the subcommand)."""
    return tok.startswith("-i") and not tok.startswith("--") and len(tok) > 2


def _option(cmd: Any, name: str) -> Any:
    for p in getattr(cmd, "params", ()):
        if name in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ())) and name.startswith("-"):
            return p
    return None


def _takes_value(opt: Any) -> bool:
    return not (getattr(opt, "is_flag", False) or getattr(opt, "count", False) or getattr(opt, "nargs", 1) == 0)


# The top-level commands in --help's order: (name, module under orchestrator.cli, attribute, is a group).
COMMANDS: tuple[tuple[str, str, str, bool], ...] = (
    ("doctor", "doctor", "doctor", False),
    ("fleet", "fleet", "fleet", False),
    ("hosts", "hosts", "app", True),
    ("deploy", "run", "deploy", False),
    ("run", "run", "run", False),
    ("cancel", "run", "cancel", False),
    ("calibrate", "regress", "calibrate", False),
    ("suites", "suites", "app", True),
    ("db", "db", "app", True),
    ("runs", "runs", "app", True),
    ("serve", "serve", "serve", False),
    ("project", "project", "project", False),
)
_COMMAND_NAMES = frozenset(c[0] for c in COMMANDS)


def _build_app(only: str | None = None) -> typer.Typer:
    """The root app with every command, or with the command ``only`` alone (its module is the only command module
    imported, and typer builds the click tree of that command only)."""
    from importlib import import_module

    new = typer.Typer(**_APP_OPTIONS)
    new.callback(epilog=ROOT_EPILOG)(root)
    for name, module, attr, group in COMMANDS:
        if only is not None and name != only:
            continue
        target = getattr(import_module(f"orchestrator.cli.{module}"), attr)
        if group:
            new.add_typer(target, name=name)
        else:
            new.command(name)(target)
    return new


@cache
def full_app() -> typer.Typer:
    """The root app with every command (what ``orch --help``, completion and tests see)."""
    return _build_app()


def __getattr__(name: str) -> Any:  # PEP 562: ``from orchestrator.cli.main import app`` gets the full app
    if name == "app":
        return full_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def app_for(args: list[str]) -> typer.Typer:
    """The app to parse ``args`` with: when they name a command and nothing but global options (``--db``,
    ``--inventory``/``-i`` with their values) stands before it, an app holding that command alone, so that
    ``orch run ...`` does not import and build the other commands (~0.07 s CPU of each short run); otherwise, and
    under shell completion, the full app (root --help, --version, a mistyped command's suggestions)."""
    if os.environ.get("_ORCH_COMPLETE"):
        return full_app()
    i = 0
    while i < len(args):
        tok = args[i]
        if tok in GLOBAL_VALUE_OPTIONS:
            i += 2
        elif tok.partition("=")[0] in GLOBAL_VALUE_OPTIONS or (tok.startswith("-i") and not tok.startswith("--")):
            i += 1
        elif tok in _COMMAND_NAMES:
            return _build_app(tok)
        else:
            break
    return full_app()


def _reader_gone_is_sigpipe(cmd: Any) -> None:
    """Make a write to stdout whose reader went away (``orch runs logs RUN | head -1``) end the process by SIGPIPE,
    whichever command or help text wrote it: ``cmd``'s ``make_context`` (where --help and --version print) and
    ``invoke`` are wrapped so that the BrokenPipeError reaches :func:`fastexit.broken_pipe` before click's
    ``Command.main``, which turns any EPIPE into ``sys.exit(1)`` (in orch's exit status: a host or run failed),
    even with ``standalone_mode=False``. A BrokenPipeError with stdout's reader still there (a pipe to a host, a
    socket) is a real error and is raised on."""

    def guarded(method: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            except BrokenPipeError:
                if _stdout_reader_gone():
                    from orchestrator.cli import fastexit

                    fastexit.broken_pipe()
                raise

        return call

    cmd.make_context = guarded(cmd.make_context)
    cmd.invoke = guarded(cmd.invoke)


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe with no reader left: Linux sets POLLERR on a pipe's write end once its read end is
    closed by every process (pipe(7), poll(2)). False for anything else, or where stdout has no descriptor."""
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return False


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app inside the one error boundary (OrchError -> red line + exit code)."""
    try:
        args = sys.argv[1:] if argv is None else argv
        refuse_undecodable(args)
        # The click command tree is built once (typer builds it from every command's signature: ~0.1 s);
        # calling `app(...)` would build it a second time. prog_name: _ORCH_COMPLETE also under python -m.
        cmd = typer.main.get_command(app_for(args))
        unbroken_hyphens(cmd)
        refuse_foreign_digits(args, numeric_options(cmd))
        _reader_gone_is_sigpipe(cmd)
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
    except BrokenPipeError:  # a plain write to stdout (JSON) whose reader went away: as the console's own writes
        from orchestrator.cli import fastexit

        fastexit.broken_pipe()
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
