"""``orch serve``: the results API and dashboard under uvicorn."""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator.cli import render
from orchestrator.cli.context import app_context


def serve(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (loopback by default).")
    ] = ("127.0.0.1"),
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="TCP port.")] = 8000,
) -> None:
    """Serve the results API (OpenAPI at /docs) and the dashboard at /.

    Beyond loopback the server refuses to start without a real ORCH_API_TOKEN (16+ characters, not a
    placeholder), and it never starts over a database a newer orch migrated (exit 2).
    """
    import uvicorn

    from orchestrator.api.app import create_app
    from orchestrator.api.security import check_listen_policy
    from orchestrator.store.migrate import refuse_newer

    settings = app_context(ctx).settings
    check_listen_policy(host, settings.api_token)
    app = create_app(settings)
    refuse_newer(app.state.store.engine)  # a newer orch's schema: exit 2, never serve it
    render.serving(host, port, settings.db_url)
    uvicorn.run(app, host=host, port=port, log_level="info")
