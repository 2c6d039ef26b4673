"""``orch doctor``: check every selected host, print a table (or --json), exit 0 only if all pass."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Annotated

import typer

from orchestrator.cli import complete, grouped, render
from orchestrator.cli.context import app_context
from orchestrator.limits import ensure_open_files, selected_count


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
    show_all: Annotated[
        bool, typer.Option("--all", help=f"The per-host table also for more than {grouped.FEW_HOSTS} hosts.")
    ] = False,
    probe_nodes: Annotated[
        bool, typer.Option("--probe-nodes", help="A Slurm group: read every usable node's facts with a short job.")
    ] = False,
) -> None:
    """Check DNS, TCP, SSH banner, host key, auth, Python/torch/CUDA, GPUs, disk and the deployed agent.

    Doctor does not use the results database: --db is checked as written (exit 2 when no command could use it),
    never connected to."""
    app = app_context(ctx)
    inv = app.inventory()
    ensure_open_files(concurrency, hosts=selected_count(inv, hosts))
    from orchestrator.doctor import DoctorOptions, run_doctor_sync  # lazy: asyncssh and its crypto, ~0.2 s
    from orchestrator.fleet import view_of_reports

    opts = DoctorOptions(timeout_s=timeout, concurrency=concurrency, probe_nodes=probe_nodes)
    with ThreadPoolExecutor(1, thread_name_prefix="orch-db-check") as pool:
        db_checked = pool.submit(app.check_db_setting)  # SQLAlchemy's import (~0.3 s) while the hosts are checked
        report = run_doctor_sync(inv, hosts, opts)
        db_checked.result()  # a --db no command could use: exit 2, before anything is printed
    group_of = {h.name: h.group for h in inv.hosts}
    reports = report.hosts
    if (slurm := inv.slurm_group(hosts)) is not None:  # its nodes: in the fleet view when probed
        group_of.update({r.host: slurm.name for r in reports[1:]})
        reports = [r for r in reports if r.facts is not None]
    view = view_of_reports(reports, group_of)
    if json_out:
        render.print_json({**report.to_dict(), "fleet": view.to_dict()})
    elif grouped.grouped(len(report.hosts), show_all):
        grouped.doctor_summary(report)
        grouped.fleet_summary(view, report)
    else:
        render.doctor_table(report)
        if any(g.hosts for g in view.groups):
            render.fleet_table(view, only_differences=True)
    raise typer.Exit(0 if report.ok else 1)
