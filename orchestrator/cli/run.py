"""``orch run SUITE --hosts SEL``, ``orch cancel RUN_ID`` and ``orch deploy``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from orchestrator.cli import complete, fastexit, grouped, render
from orchestrator.cli.argcheck import check_label
from orchestrator.cli.context import app_context
from orchestrator.errors import UsageError
from orchestrator.limits import ensure_open_files, selected_count
from orchestrator.store.compute import RUN_REF_FORMS

DEFAULT_CONCURRENCY = 64  # hosts worked on at once by deploy and run (doctor's own default is alike)
ShowAllOpt = Annotated[
    bool, typer.Option("--all", help=f"Per-host tables also for more than {grouped.FEW_HOSTS} hosts.")
]
ConcurrencyOpt = Annotated[int, typer.Option("--concurrency", min=1, help="Hosts worked on at once.")]


def _parse_sets(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--set {item!r} is not KEY=VALUE", "for example --set M=1,8,64 or --set dtype=bf16")
        out[key.strip()] = value.strip()
    return out


def run(
    ctx: typer.Context,
    suite: Annotated[
        str | None,
        typer.Argument(
            help="Suite name (orch suites list). Not needed with --resume.", autocompletion=complete.suite_names
        ),
    ] = None,
    hosts: Annotated[str | None, typer.Option(
        "--hosts", "-H", help="Group, host, glob or comma list.", autocompletion=complete.selectors
    )] = None,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Suite parameter KEY=VALUE (repeatable), e.g. M=1,8,64.")
    ] = None,
    preset: Annotated[
        str | None, typer.Option("--preset", help="Parameter preset (kimi-k2 on CUDA hosts, tiny otherwise).")
    ] = None,
    repeat: Annotated[
        int | None, typer.Option("--repeat", min=1, help="Timed samples per case (default: the suite's).")
    ] = None,
    label: Annotated[str | None, typer.Option("--label", help="Free text stored with the run.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
    resume: Annotated[
        str | None, typer.Option("--resume", help=f"Reattach to a run and collect what is left: {RUN_REF_FORMS}.")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Connect deadline per step, s.")
    ] = 10.0,
    suite_dir: Annotated[
        list[Path] | None,
        typer.Option("--suite-dir", help="Directory of user suite files (*.yaml), repeatable; also ORCH_SUITE_DIR."),
    ] = None,
    wait: Annotated[
        float,
        typer.Option(
            "--wait", min=0, metavar="SECONDS",
            help="Wait up to SECONDS for GPUs another run holds (0: such a host fails at once, naming the holder).",
        ),
    ] = 0.0,
    require_uniform: Annotated[
        bool,
        typer.Option(
            "--require-uniform",
            help="Refuse to start (exit 1, with the differences) when hosts of a group differ in a fleet field "
            "(orch fleet); also `require_uniform: true` per group in the inventory.",
        ),
    ] = False,
    allow_drift: Annotated[
        list[str] | None,
        typer.Option("--allow-drift", help="A fleet field (e.g. driver) let through by --require-uniform; repeatable."),
    ] = None,
    telemetry_ms: Annotated[
        int,
        typer.Option("--telemetry-ms", min=0, help="GPU telemetry interval per case, ms; 0 = off."),
    ] = 100,
    show_all: ShowAllOpt = False,
    concurrency: ConcurrencyOpt = DEFAULT_CONCURRENCY,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help=f"A progress bar per host also for more than {grouped.FEW_HOSTS} hosts."
        ),
    ] = False,
) -> None:
    """Run SUITE on the selected hosts in parallel, streaming results into the store."""
    from orchestrator.runner import Runner, RunRequest

    app = app_context(ctx)
    if label is not None:
        check_label(label, 'e.g. orch run moe-sweep --hosts b300 --label "nightly fp8"')
    if resume is None and (suite is None or hosts is None):
        raise UsageError(
            "orch run needs SUITE and --hosts (or --resume RUN_ID)", "for example: orch run moe-sweep --hosts b300"
        )
    req = RunRequest(
        suite=suite or "",
        selector=hosts,
        sets=_parse_sets(set_ or []),
        preset=preset,
        repeat=repeat,
        label=label,
        timeout_s=timeout,
        wait_s=wait,
        require_uniform=require_uniform,
        allow_drift=tuple(allow_drift or ()),
        telemetry_ms=telemetry_ms,
        concurrency=concurrency,
        stopped_limit_s=app.settings.worker_stopped_s,
        silent_limit_s=app.settings.follower_silent_s,
    )
    names = _selected(app, hosts, resume)
    ensure_open_files(concurrency, hosts=len(names))
    # A new run needs the store only once the hosts' facts are read: it opens meanwhile on a thread.
    opening = app.store() if resume else app.store_in_background()
    # Nothing is drawn into a pipe: the display is transient, and stopping it there leaves a blank line on stderr.
    drawn = not json_out and render.err_console().is_terminal
    progress = _progress(app, names, enabled=drawn, verbose=verbose)
    runner = Runner(app.inventory(), opening, req, progress, registry=app.registry(suite_dir or []))
    from orchestrator.cli.interrupts import run_interruptible

    try:
        with progress:
            outcome = run_interruptible(
                runner.resume(runner.store.resolve_run_id(resume)) if resume else runner.run(),
                abandon=runner.abandon_cancel, said=lambda action: render.interrupt_said(runner.run_id, action),
            )
    except KeyboardInterrupt:
        render.interrupted(runner.run_id, _unconfirmed(runner))
        raise typer.Exit(130) from None
    from orchestrator.cli.runs import SHOW_MAX_RESULTS

    if not outcome.stored:  # every host failed before starting: nothing stored, no directory made
        if json_out:
            render.print_json({**outcome.to_dict(), "hosts": [
                {**h.to_dict(), "hint": h.hint} for h in outcome.hosts], "stored": False})  # fmt: skip
        elif grouped.grouped(len(outcome.hosts), show_all):
            grouped.run_summary(outcome)
        else:
            render.run_outcome(outcome, None, [])
        raise typer.Exit(1)
    store = runner.store
    page = store.results(outcome.run_id, limit=SHOW_MAX_RESULTS)
    if json_out:
        from orchestrator.rundoc import run_document

        doc = run_document(store.get_run(outcome.run_id), page.items)
        live = {h.host: h for h in outcome.hosts}  # this invocation's verdict per host wins over the stored one
        for h in doc["hosts"]:
            if (o := live.get(h["host"])) is not None:
                h.update(status=o.status, error=o.error or h["error"], hint=o.hint, state_dir=o.state_dir)
        render.print_json({**doc, "status": outcome.status})
    elif grouped.grouped(len(outcome.hosts), show_all):
        grouped.run_summary(outcome)
    else:
        render.run_outcome(outcome, store.get_run(outcome.run_id), page.items)
    store.close()  # the writer's thread ended with the run; nothing else is open: exit without the teardown
    fastexit.request()
    raise typer.Exit(0 if outcome.status == "completed" else 1)


def _unconfirmed(runner: Any) -> list[str]:
    """The hosts of an interrupted run whose remote stop was not confirmed (stored in their host run's error)."""
    from orchestrator.resume import stop_unconfirmed

    if not runner.run_id:
        return []
    return [h.host for h in runner.store.get_run(runner.run_id).host_runs if stop_unconfirmed([h.error])]


def _selected(app: Any, selector: str | None, resume: str | None) -> list[str]:
    """The host names this run covers: the selection (a Slurm group: its name; one login connection), or the
    resumed run's hosts."""
    if resume is not None:
        store = app.store()
        return [h.host for h in store.get_run(store.resolve_run_id(resume)).host_runs]
    if app.inventory().slurm_group(selector) is not None:  # its nodes are known once Slurm allocates them
        return [str(selector).strip()]
    return [h.name for h in app.inventory().select(selector)]


def _progress(app: Any, names: list[str], *, enabled: bool, verbose: bool) -> Any:
    """Per-host bars for a few hosts or --verbose, else the fleet summary (one line per group)."""
    if verbose or len(names) <= grouped.FEW_HOSTS:
        return render.RunProgress(enabled=enabled)
    from orchestrator.cli.progress import FleetProgress

    group = {h.name: h.group for h in app.inventory().hosts}
    return FleetProgress({n: group.get(n, "?") for n in names}, enabled=enabled)


def cancel(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help=f"The run to stop: {RUN_REF_FORMS}.")],
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
    suite_dir: Annotated[
        list[Path] | None,
        typer.Option("--suite-dir", help="Directory of the run's user suite file, to collect what its hosts hold."),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Connect deadline per host, s (all hosts: 6x this).")
    ] = 10.0,
) -> None:
    """Stop a run's agents on every host, collect what their spools hold beyond the stored lines (a host whose
    agent had finished keeps its own end), and mark the rest cancelled (results so far are kept). Exit 1 when the
    stop failed on any host (named, with why), else 0."""
    from orchestrator.runner import cancel_run

    app = app_context(ctx)
    outcome = asyncio.run(cancel_run(app.inventory(), app.store(), run_id, timeout_s=timeout,
                                     registry=app.registry(suite_dir or [])))  # fmt: skip
    if json_out:
        render.print_json(outcome.to_dict())
    else:
        render.cancelled(outcome)
    raise typer.Exit(1 if outcome.stop_failed else 0)


def deploy(
    ctx: typer.Context,
    hosts: Annotated[
        str | None, typer.Option(
            "--hosts", "-H", help="Group, host, glob or comma list (default: all).", autocompletion=complete.selectors
        )
    ] = None,
    build: Annotated[Path | None, typer.Option("--build", help="Engine build: a directory or a .tar.gz.")] = None,
    keep: Annotated[
        int, typer.Option("--keep", min=1, help="Builds kept per host (older ones pruned).")
    ] = 3,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Connect deadline per step, s.")
    ] = 10.0,
    show_all: ShowAllOpt = False,
    concurrency: ConcurrencyOpt = DEFAULT_CONCURRENCY,
) -> None:
    """Push the agent (and an engine build) to the hosts, content-addressed and verified by sha256."""
    from orchestrator.deploy_service import deploy_hosts

    app = app_context(ctx)
    inv = app.inventory()
    ensure_open_files(concurrency, hosts=selected_count(inv, hosts))
    report = asyncio.run(
        deploy_hosts(inv, hosts, build, keep=keep, timeout_s=timeout, store=app.store(), concurrency=concurrency)
    )
    if json_out:
        render.print_json(report.to_dict())
    elif grouped.grouped(len(report.rows), show_all):
        grouped.deploy_summary(report)
    else:
        render.deploy_table(report)
    raise typer.Exit(0 if report.ok else 1)
