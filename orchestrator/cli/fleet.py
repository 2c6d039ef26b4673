"""``orch fleet``: per group, the facts that change results, their majority value and the hosts that differ."""

from __future__ import annotations

from typing import Annotated

import typer

from orchestrator.cli import render
from orchestrator.cli.context import app_context


def fleet(
    ctx: typer.Context,
    hosts: Annotated[
        str | None, typer.Option("--hosts", "-H", help="Group, host, glob or comma list (default: all).")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Deadline per step (DNS, TCP, banner, login), s.")
    ] = 10.0,
) -> None:
    """Compare the selected hosts within their groups (driver, CUDA, torch, NCCL, VBIOS, ECC, clocks, PCIe,
    NVLink, Xid, CPU governor ...); exit 1 when a host differs or a host could not be read."""
    app = app_context(ctx)
    inv = app.inventory()
    from orchestrator.doctor import DoctorOptions, run_doctor_sync  # lazy: asyncssh and its crypto, ~0.2 s
    from orchestrator.fleet import view_of_reports

    report = run_doctor_sync(inv, hosts, DoctorOptions(timeout_s=timeout))
    view = view_of_reports(report.hosts, {h.name: h.group for h in inv.hosts})
    if json_out:
        render.print_json(view.to_dict())
    else:
        render.fleet_table(view)
    uniform = not view.differences and not any(g.unreachable for g in view.groups)
    raise typer.Exit(0 if uniform else 1)
