"""``orch hosts list`` and ``orch hosts trust HOST``."""

from __future__ import annotations

import asyncio
import sys
from typing import Annotated

import typer

from orchestrator.cli import complete, render
from orchestrator.cli.context import app_context
from orchestrator.errors import UsageError

app = typer.Typer(
    help="Show the inventory; record a host's SSH key after confirming its fingerprint.", no_args_is_help=True,
    rich_markup_mode=None,
)


@app.command("list")
def list_hosts(
    ctx: typer.Context,
    hosts: Annotated[
        str | None, typer.Option(
            "--hosts", "-H", help="Group, host, glob or comma list (default: all).", autocompletion=complete.selectors
        )
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
) -> None:
    """Show the resolved inventory (defaults and group vars applied)."""
    selected = app_context(ctx).inventory().select(hosts)
    if json_out:
        render.print_json({"hosts": [h.to_dict() for h in selected]})
    else:
        render.hosts_table(selected)


@app.command("show")
def show_host(
    ctx: typer.Context,
    host: Annotated[str, typer.Argument(help="Inventory host name.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
) -> None:
    """Show how OpenSSH resolves HOST (ssh -G with the inventory's settings) and where each setting came from."""
    from orchestrator.transport import sshconfig

    doc = asyncio.run(sshconfig.describe(app_context(ctx).inventory().host(host)))
    if json_out:
        render.print_json(doc)
    else:
        render.ssh_settings(host, doc["rows"])


@app.command("trust")
def trust_host(
    ctx: typer.Context,
    host: Annotated[str, typer.Argument(help="Inventory host name.", autocompletion=complete.host_names)],
    fingerprint: Annotated[
        str | None,
        typer.Option("--fingerprint", help="Expected key fingerprint, SHA256:...; checked against the offered key."),
    ] = None,
    replace: Annotated[
        bool,
        typer.Option(
            "--replace",
            help="Replace the host's changed key once its new fingerprint is confirmed out of band "
            "(old file kept as known_hosts.old).",
        ),
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Deadline to fetch the key, s.")
    ] = 10.0,
) -> None:
    """Fetch the host key offered by HOST and record it in known_hosts once you confirm its fingerprint.

    A CHANGED key is refused without --replace (exit 1, as orch doctor fails the host); 2 is a usage error."""
    from orchestrator import trust  # lazy: asyncssh, ~0.2 s, only for the commands that talk SSH

    h = app_context(ctx).inventory().host(host)
    offer = asyncio.run(trust.fetch_offer(h, timeout_s=timeout))
    render.trust_offer(offer)
    if offer.verdict.verdict in ("match", "cert-authority"):
        render.console().print(f"{host}: already trusted ({offer.verdict.verdict}); nothing to do.")
        return
    trust.refuse_changed(offer, replace)  # before asking: a changed key without --replace is refused anyway
    confirmed = fingerprint
    if confirmed is None:
        if not sys.stdin.isatty():
            raise UsageError(
                f"orch hosts trust asks for the fingerprint of {host}'s key, and stdin is not a terminal",
                f"compare the fingerprint above with the host's console, then: orch hosts trust {host} "
                "--fingerprint SHA256:...",
            )
        confirmed = typer.prompt(
            "Type the fingerprint you verified on the host's console (SHA256:...), or Ctrl-C to stop",
            default="",
            show_default=False,
        )
    result = trust.record(offer, confirmed_fingerprint=confirmed, replace=replace)
    render.trust_result(host, result)
