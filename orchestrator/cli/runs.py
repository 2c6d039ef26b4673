"""``orch runs list|show RUN_ID|compare BASE HEAD``: stored runs as rich tables or ``--json``."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Annotated

import typer

from orchestrator.cli import render
from orchestrator.cli.context import app_context
from orchestrator.store.records import RunFilter
from orchestrator.store.repo import Store

app = typer.Typer(help="List, show and compare stored runs.", no_args_is_help=True)
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
SHOW_MAX_RESULTS = 100_000


@contextmanager
def _store(ctx: typer.Context) -> Iterator[Store]:
    """The existing store (reading never creates an empty SQLite file); closed when the command ends."""
    store = app_context(ctx).store(create=False)
    try:
        yield store
    finally:
        store.close()


@app.command("list")
def list_runs(
    ctx: typer.Context,
    suite: Annotated[str | None, typer.Option(help="Only this suite.")] = None,
    host: Annotated[str | None, typer.Option(help="Only runs that include this host.")] = None,
    status: Annotated[
        str | None, typer.Option(help="completed, partial, failed, cancelled, running.")
    ] = None,
    label: Annotated[str | None, typer.Option(help="Only runs with this label.")] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Rows to show; default 20.")] = 20,
    json_out: JsonOpt = False,
) -> None:
    """Runs, newest first."""
    with _store(ctx) as store:
        page = store.list_runs(RunFilter(suite=suite, host=host, status=status, label=label), limit=limit)
    if json_out:
        render.print_json(asdict(page))
    else:
        render.runs_table(page)


@app.command("show")
def show(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help="Run id, or a unique prefix of 8+ characters.")],
    json_out: JsonOpt = False,
) -> None:
    """One run: its hosts, and a table of results per host (the roofline figures for moe-sweep)."""
    with _store(ctx) as store:
        rid = store.resolve_run_id(run_id)
        run, results = store.get_run(rid), store.results(rid, limit=SHOW_MAX_RESULTS)
    if json_out:
        render.print_json({"run": asdict(run), "results": [asdict(r) for r in results.items]})
    else:
        render.run_detail(run, results.items)


@app.command("compare")
def compare(
    ctx: typer.Context,
    base: Annotated[str, typer.Argument(help="Base run id (or unique prefix).")],
    head: Annotated[str, typer.Argument(help="Head run id (or unique prefix).")],
    metric: Annotated[
        str | None, typer.Option(help="Metric to compare; default time_ms, else the first.")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Per-case ratio head/base of the medians, a verdict ('within noise' when the stored p10-p90 spread hides
    the change), and the geometric mean. Runs of different suites, or sharing no case, are an error (exit 2)."""
    with _store(ctx) as store:
        result = store.compare(store.resolve_run_id(base), store.resolve_run_id(head), metric=metric)
    if json_out:
        render.print_json(asdict(result))
    else:
        render.comparison_table(result)
