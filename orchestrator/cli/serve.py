"""``orch serve``: the results API and dashboard under uvicorn."""

from __future__ import annotations

import errno
import socket
from typing import Annotated

import typer

from orchestrator.cli import render
from orchestrator.cli.context import app_context


def serve(
    ctx: typer.Context,
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on.")
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

    ctx_app = app_context(ctx)
    settings = ctx_app.settings
    check_listen_policy(host, settings.api_token)
    ctx_app.check_db_url(create=False)  # as the CLI's reading commands: a missing SQLite file is exit 2
    sock = _listen(host, port)  # before the banner: a port in use is exit 2 naming it, not uvicorn's exit 3
    app = create_app(settings)
    refuse_newer(app.state.store.engine)  # a newer orch's schema: exit 2, never serve it
    render.serving(host, port, settings.db_url)
    uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="info")).run(sockets=[sock])


def _listen(host: str, port: int) -> socket.socket:
    """The listening socket, bound as uvicorn binds it (``uvicorn.Config.bind_socket``: SO_REUSEADDR, IPv6 when
    the address holds a colon). Raises ConfigError (exit 2) naming the address, the port and ``--port``."""
    from orchestrator.errors import ConfigError

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {host} is already in use (another orch serve, or another server)",
                f"pick a free port with --port, e.g. orch serve --port {port + 1 if port < 65535 else 8001}",
            ) from None
        raise ConfigError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}",
            "pass an address of this machine with --host (default 127.0.0.1) and a free port with --port",
        ) from None
    return sock
