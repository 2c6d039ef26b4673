"""``orch suites list|show SUITE``: the suites orch can run, their parameters and presets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from orchestrator.cli import complete, render
from orchestrator.cli.context import AppContext
from orchestrator.settings import Settings
from orchestrator.suites.registry import Registry

app = typer.Typer(
    help="Benchmark suites: list them, show one's parameters and presets.", no_args_is_help=True,
    rich_markup_mode=None,
)

JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON document on stdout (default: a table).")
]
SuiteDirOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--suite-dir",
        help="Directory of user suite files (*.yaml), repeatable; also ORCH_SUITE_DIR and the inventory's suite_dir.",
    ),
]


def _registry(ctx: typer.Context, suite_dir: list[Path] | None) -> Registry:
    obj: Any = ctx.find_root().obj
    app_ctx = obj if isinstance(obj, AppContext) else AppContext(Settings())
    return app_ctx.registry(suite_dir or [])


@app.command("list")
def list_(ctx: typer.Context, json_out: JsonOpt = False, suite_dir: SuiteDirOpt = None) -> None:
    """List the known suites (built-in and user suite files): name, agent bench, description, source."""
    rows = [
        {"name": s.name, "bench": s.bench, "description": s.description, "source": s.describe()["source"]}
        for s in _registry(ctx, suite_dir).all()
    ]
    if json_out:
        render.print_json({"suites": rows})
    else:
        render.suites_table(rows)


@app.command("show")
def show(
    ctx: typer.Context,
    suite: Annotated[
        str,
        typer.Argument(
            help="Suite name, e.g. moe-sweep (see `orch suites list`).", autocompletion=complete.suite_names
        ),
    ],
    json_out: JsonOpt = False,
    suite_dir: SuiteDirOpt = None,
) -> None:
    """Show a suite's parameters (type, default, accepted values, unit) and presets; for a suite file also its
    command, grid, parser, metrics and references."""
    doc = _registry(ctx, suite_dir).get(suite).describe()
    if json_out:
        render.print_json(doc)
    else:
        render.suite_detail(doc)
