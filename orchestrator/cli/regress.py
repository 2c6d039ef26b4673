"""``orch calibrate SUITE``, ``orch runs rerun RUN`` and ``orch runs check HEAD --base BASE`` (see
``orchestrator.regress``)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli import complete, render, render_regress
from orchestrator.cli.context import app_context
from orchestrator.cli.run import _parse_sets
from orchestrator.store.compute import RUN_REF_FORMS

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
SuiteDirOpt = Annotated[
    list[Path] | None,
    typer.Option("--suite-dir", help="Directory of user suite files (*.yaml), repeatable; also ORCH_SUITE_DIR."),
]
TimeoutOpt = Annotated[float, typer.Option("--timeout", min=0.1, help="Connect deadline per step, s.")]
RUN_REF = f"The run: {RUN_REF_FORMS}."


def calibrate(
    ctx: typer.Context,
    suite: Annotated[str, typer.Argument(help="Suite name (orch suites list).", autocompletion=complete.suite_names)],
    hosts: Annotated[
        str, typer.Option("--hosts", "-H", help="Group, host, glob or comma list.", autocompletion=complete.selectors)
    ],
    runs: Annotated[int, typer.Option("--runs", min=2, help="Identical runs back to back.")] = 3,
    set_: Annotated[
        list[str] | None, typer.Option("--set", help="Suite parameter KEY=VALUE (repeatable), as for orch run.")
    ] = None,
    preset: Annotated[str | None, typer.Option("--preset", help="Parameter preset, as for orch run.")] = None,
    repeat: Annotated[
        int | None, typer.Option("--repeat", min=1, help="Timed samples per case (default: the suite's).")
    ] = None,
    suite_dir: SuiteDirOpt = None,
    timeout: TimeoutOpt = 10.0,
    json_out: JsonOpt = False,
) -> None:
    """A/A noise calibration: run SUITE --runs times back to back on the hosts and store, per host, case and
    metric, how far the identical runs' medians moved apart (and the within-run spread). Later comparisons of
    those cases use it as their noise band. Exit 0 when every run completed, 1 otherwise."""
    from orchestrator.regress import calibrate as run_calibration
    from orchestrator.runner import RunRequest

    app = app_context(ctx)
    req = RunRequest(
        suite=suite, selector=hosts, sets=_parse_sets(set_ or []), preset=preset, repeat=repeat, timeout_s=timeout
    )
    progress = render.RunProgress(enabled=not json_out)
    with progress:
        out = asyncio.run(
            run_calibration(
                app.inventory(), app.store(), req, runs=runs, registry=app.registry(suite_dir or []), observer=progress
            )
        )
    if json_out:
        render.print_json(out.to_dict())
    else:
        render_regress.calibration_table(out)
    raise typer.Exit(0 if all(r.status == "completed" for r in out.runs) else 1)


def rerun(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help=RUN_REF)],
    hosts: Annotated[
        str | None, typer.Option("--hosts", "-H", help="Comma list of the run's hosts; default: all of them.")
    ] = None,
    cases: Annotated[
        list[str] | None,
        typer.Option("--cases", help="Only the cases matching KEY=VALUE[,KEY=VALUE] (repeatable); default: all."),
    ] = None,
    suite_dir: SuiteDirOpt = None,
    timeout: TimeoutOpt = 10.0,
    json_out: JsonOpt = False,
) -> None:
    """Replay a stored run: the same suite, --set values, preset, repeat and seed on its hosts (or --hosts), for
    its cases (or --cases); the new run records which run it replays (info.replays, label 'rerun of ID').
    Exit 0 when the rerun completed, 1 otherwise."""
    from orchestrator.regress import parse_cases, rerun_request
    from orchestrator.runner import Runner

    app = app_context(ctx)
    store = app.store()
    rid = store.resolve_run_id(run_id)
    wanted = parse_cases(store, rid, cases or [])
    host_list = [h.strip() for h in hosts.split(",") if h.strip()] if hosts else None
    req = rerun_request(store, rid, hosts=host_list, cases=wanted, timeout_s=timeout)
    progress = render.RunProgress(enabled=not json_out)
    runner = Runner(app.inventory(), store, req, progress, registry=app.registry(suite_dir or []))
    try:
        with progress:
            outcome = asyncio.run(runner.run())
    except KeyboardInterrupt:
        render.interrupted(runner.run_id)
        raise typer.Exit(130) from None
    if json_out:
        render.print_json({**outcome.to_dict(), "replays": rid})
    else:
        render_regress.rerun_outcome(outcome, rid)
    raise typer.Exit(0 if outcome.status == "completed" else 1)


def check(
    ctx: typer.Context,
    head: Annotated[str, typer.Argument(help=f"Head run (the candidate). {RUN_REF}")],
    base: Annotated[str, typer.Option("--base", help=f"Base run to compare against. {RUN_REF}")],
    confirm: Annotated[
        bool,
        typer.Option("--confirm", help="Rerun the flagged cases on the same hosts; only reproduced ones count."),
    ] = False,
    metric: Annotated[str | None, typer.Option(help="Metric to compare; default time_ms, else the first.")] = None,
    min_change: Annotated[
        float | None,
        typer.Option(
            "--min-change",
            min=0.0,
            help="Decide the cases too few samples leave untested on their medians: a change beyond this "
            "(relative, 0.05 = 5%) in the bad direction is a regression, else they pass. Default: none "
            "(such cases are inconclusive unless calibrated or already beyond compare's 5%).",
        ),
    ] = None,
    allow_missing: Annotated[
        bool,
        typer.Option(
            "--allow-missing",
            help="Judge only the cases both runs measured: cases of BASE that HEAD lacks and HEAD's failed cases "
            "are listed but do not fail the gate. Default: they fail it (exit 1).",
        ),
    ] = False,
    suite_dir: SuiteDirOpt = None,
    timeout: TimeoutOpt = 10.0,
    json_out: JsonOpt = False,
) -> None:
    """A CI gate: compare HEAD against BASE with statistics (docs/statistics.md). Exit 1 on a regression — a
    case called slower, or one the test cannot judge whose medians moved beyond compare's 5% threshold (or
    --min-change, or its calibrated band); with --confirm only those whose rerun is flagged again; exit 1 also
    when HEAD lacks cases BASE measured or has failed cases (unless --allow-missing), or measured none. Exit 3
    inconclusive: no regression, but some case could not be judged (too few samples: rerun both runs with the
    --repeat named). Exit 0 pass; 2 usage errors (unknown run, a run against itself, runs of different
    suites)."""
    from orchestrator.regress import check as run_check

    app = app_context(ctx)
    store = app.store(create=False)
    h, b = store.resolve_run_id(head), store.resolve_run_id(base)
    progress = render.RunProgress(enabled=not json_out and confirm)
    with progress:
        out = asyncio.run(
            run_check(
                app.inventory() if confirm else None,
                store,
                h,
                b,
                confirm=confirm,
                metric=metric,
                min_change=min_change,
                allow_missing=allow_missing,
                registry=app.registry(suite_dir or []) if confirm else None,
                observer=progress,
                timeout_s=timeout,
            )
        )
    if json_out:
        render.print_json(out.to_dict())
    else:
        render_regress.check_outcome(out)
    raise typer.Exit(out.exit_code)


def changes(
    ctx: typer.Context,
    suite: Annotated[str, typer.Option("--suite", help="Suite whose history to scan.")],
    metric: Annotated[str, typer.Option("--metric", help="Metric, e.g. time_ms.")] = "time_ms",
    host: Annotated[str | None, typer.Option("--host", help="Only this host's series (default: every host).")] = None,
    min_change: Annotated[
        float, typer.Option("--min-change", min=0.0, help="Smallest relative change reported (0.02: 2%).")
    ] = 0.02,
    json_out: JsonOpt = False,
) -> None:
    """Change points over history: per host and case, the metric's median per run ordered by run start time,
    scanned with Apache Otava (e-divisive means, t-test p <= 0.001); stored (replacing the earlier scan of those
    series) for /api/v1/changes and the dashboard."""
    from dataclasses import asdict

    from orchestrator.store.changes_repo import detect_changes

    app = app_context(ctx)
    report = detect_changes(app.store(), suite, metric, host=host, min_change=min_change)
    if json_out:
        render.print_json(asdict(report))
    else:
        render_regress.changes_table(report)
