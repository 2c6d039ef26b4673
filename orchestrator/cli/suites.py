"""``orch suites list|show SUITE``: the suites orch can run, their parameters and presets."""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator.cli import render
from orchestrator.suites.registry import get_suite, list_suites

app = typer.Typer(
    help="Benchmark suites: list them, show one's parameters and presets.", no_args_is_help=True
)

JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print one JSON document on stdout (default: a table).")
]


@app.command("list")
def list_(json_out: JsonOpt = False) -> None:
    """List the known suites: name, agent bench, description."""
    rows = [{"name": s.name, "bench": s.bench, "description": s.description} for s in list_suites()]
    if json_out:
        render.print_json({"suites": rows})
    else:
        render.suites_table(rows)


@app.command("show")
def show(
    suite: Annotated[str, typer.Argument(help="Suite name, e.g. moe-sweep (see `orch suites list`).")],
    json_out: JsonOpt = False,
) -> None:
    """Show a suite's parameters (type, default, accepted values, unit) and presets."""
    doc = get_suite(suite).describe()
    if json_out:
        render.print_json(doc)
    else:
        render.suite_detail(doc)
