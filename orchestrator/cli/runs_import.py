"""``orch runs import SPOOL [--host NAME]``: a host's copied ``events.jsonl`` into the store (see spool_import)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli import render
from orchestrator.cli.context import app_context


def import_spool(
    ctx: typer.Context,
    spool: Annotated[Path, typer.Argument(help="A host's events.jsonl, copied off the host.")],
    host: Annotated[
        str | None, typer.Option("--host", help="Host that wrote it; default: the run's only host.")
    ] = None,
    suite_dir: Annotated[
        list[Path] | None,
        typer.Option("--suite-dir", help="Directory of user suite files (*.yaml), repeatable; also ORCH_SUITE_DIR."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
) -> None:
    """Store a copied spool's lines (idempotent: lines already stored are skipped) and judge the host as a live
    run would. Exit 0 when the host is completed, 1 otherwise."""
    from orchestrator.spool_import import import_spool as run_import

    app = app_context(ctx)
    inventory = app.inventory() if Path(app.settings.inventory).is_file() else None
    outcome = run_import(app.store(), spool, host=host, registry=app.registry(suite_dir or []), inventory=inventory)
    if json_out:
        render.print_json(outcome.to_dict())
    else:
        render.import_outcome(outcome)
    raise typer.Exit(0 if outcome.status == "completed" else 1)
