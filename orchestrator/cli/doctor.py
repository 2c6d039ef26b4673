"""``orch doctor``: check every selected host, print a table (or --json), exit 0 only if all pass."""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator.cli import complete, render
from orchestrator.cli.context import app_context
from orchestrator.doctor import DoctorOptions, run_doctor_sync


def doctor(
    ctx: typer.Context,
    hosts: Annotated[
        str | None, typer.Option(
            "--hosts", "-H", help="Group, host, glob or comma list (default: all).", autocompletion=complete.selectors
        )
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Deadline per step (DNS, TCP, banner, login) in s.")
    ] = 10.0,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Hosts checked at once.")] = 64,
) -> None:
    """Check DNS, TCP, SSH banner, host key, auth, Python/torch/CUDA, GPUs, disk and the deployed agent."""
    app = app_context(ctx)
    report = run_doctor_sync(app.inventory(), hosts, DoctorOptions(timeout_s=timeout, concurrency=concurrency))
    if json_out:
        render.print_json(report.to_dict())
    else:
        render.doctor_table(report)
    raise typer.Exit(0 if report.ok else 1)
