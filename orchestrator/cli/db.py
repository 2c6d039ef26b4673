"""``orch db upgrade``: bring the database at ``--db`` / ``$ORCH_DB_URL`` to the latest schema."""

from __future__ import annotations

import typer

from orchestrator.cli import render
from orchestrator.cli.context import app_context

app = typer.Typer(help="Database maintenance.", no_args_is_help=True, rich_markup_mode=None)


@app.command("upgrade")
def upgrade(ctx: typer.Context) -> None:
    """Create or migrate the schema to the latest revision (safe to run repeatedly)."""
    app = app_context(ctx)
    app.check_db_url(create=True)  # the same refusals, words and exit 2 as every other command
    url = app.settings.db_url
    from orchestrator.store.repo import Store  # lazy: SQLAlchemy only for the commands that open the store

    store = Store.from_url(url)
    try:
        store.upgrade()
        render.db_upgraded(url, store.schema_revision())
    finally:
        store.close()
