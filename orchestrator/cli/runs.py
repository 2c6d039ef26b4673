"""``orch runs list|show RUN_ID|compare BASE HEAD|import SPOOL|logs RUN_ID|plot RUN...``: stored runs as rich tables or
``--json``."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from orchestrator.cli import regress, render, runs_import, runs_plot
from orchestrator.cli.argcheck import check_label
from orchestrator.cli.context import app_context
from orchestrator.errors import OrchError, UsageError
from orchestrator.rundoc import run_document
from orchestrator.store.compute import RUN_REF_FORMS, short_run_id
from orchestrator.store.records import RUN_STATUSES, RunFilter
from orchestrator.wording import counted

if TYPE_CHECKING:
    from orchestrator.store.repo import Store

app = typer.Typer(help="List, show and compare stored runs.", no_args_is_help=True, rich_markup_mode=None)
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
RUN_REF_HELP = f"The run: {RUN_REF_FORMS}."
_AGE_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])", re.ASCII)  # ASCII digits: \d also takes other scripts'
_AGE_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``--since``: an age (``30m``, ``6h``, ``2d``, ``1w``) before ``now`` or an ISO 8601 time (naive = UTC), as an
    aware UTC datetime. Raises UsageError naming the accepted forms."""
    now = now or datetime.now(timezone.utc)
    m = _AGE_RE.fullmatch(text.strip().lower())
    if m:
        try:
            return now - timedelta(seconds=float(m.group(1)) * _AGE_UNIT_S[m.group(2)])
        except (OverflowError, ValueError):  # older than datetime.min (year 1)
            raise UsageError(
                f"--since {text!r} reaches back before the year 1",
                "give a smaller age (e.g. --since 3650d) or leave --since out for all runs",
            ) from None
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(
            f"--since {text!r} is neither an age nor an ISO 8601 time",
            "e.g. --since 6h, --since 2d, --since 2026-11-30 or --since 2026-11-30T08:00",
        ) from None
    try:
        return when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)
    except OverflowError:  # 9999-12-31T23:59-01:00 is after the last datetime in UTC
        raise UsageError(
            f"--since {text!r} is outside the years 1 to 9999 in UTC", "e.g. --since 2026-11-30T08:00+01:00"
        ) from None


SHOW_MAX_RESULTS = 100_000
app.command("import")(runs_import.import_spool)
app.command("rerun")(regress.rerun)
app.command("check")(regress.check)
app.command("plot")(runs_plot.plot)
app.command("changes")(regress.changes)


@contextmanager
def _store(ctx: typer.Context) -> Iterator[Store]:
    """The existing store (reading never creates an empty SQLite file); closed when the command ends."""
    store = app_context(ctx).store(create=False)
    try:
        yield store
    finally:
        store.close()


@app.command("list")
def list_runs(
    ctx: typer.Context,
    suite: Annotated[str | None, typer.Option(help="Only this suite.")] = None,
    host: Annotated[str | None, typer.Option(help="Only runs that include this host.")] = None,
    status: Annotated[
        str | None, typer.Option(help=f"Only runs in this state, in any case: {', '.join(RUN_STATUSES)}.")
    ] = None,
    label: Annotated[str | None, typer.Option(help="Only runs with this label.")] = None,
    since: Annotated[
        str | None,
        typer.Option(help="Only runs started since: an age (30m, 6h, 2d, 1w) or an ISO 8601 time (naive = UTC)."),
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=1000, help="Rows to show.")] = 20,
    json_out: JsonOpt = False,
) -> None:
    """Runs, newest first. Ids are shown in their short form (the last 8 hex digits), which every command takes."""
    if status is not None and status.lower() not in RUN_STATUSES:
        raise UsageError(f"--status {status!r} is not a run state", f"use one of: {', '.join(RUN_STATUSES)}")
    status = status.lower() if status is not None else None  # RUNNING, Running: running
    f = RunFilter(suite=suite, host=host, status=status, label=label, since=parse_since(since) if since else None)
    with _store(ctx) as store:
        page = store.list_runs(f, limit=limit)
        if not page.items and suite is not None:
            _check_suite_name(ctx, store, suite)
    if json_out:
        doc = asdict(page)
        for item, run in zip(doc["items"], page.items, strict=True):  # as runs show says it: {warning, hint}
            note = render.orphaned_note(run)
            item["orphaned"] = None if note is None else {"warning": note[0], "hint": note[1]}
        render.print_json(doc)
    else:
        render.runs_table(page)


def _check_suite_name(ctx: typer.Context, store: Store, suite: str) -> None:
    """An empty answer for ``--suite NAME`` is the truth for a suite orch knows (built-in, a suite file, or one
    with stored runs); for any other name it is a typo: UsageError listing the known names."""
    known = set(store.stored_suites())
    try:
        known |= set(app_context(ctx).registry().names())
    except OrchError:
        pass  # a broken suite file is reported by the commands that load suites; the stored names still count
    if suite not in known:
        raise UsageError(f"--suite {suite!r} is neither a known suite nor one with stored runs",
                         f"suites: {', '.join(sorted(known)) or 'none'}")  # fmt: skip


@app.command("show")
def show(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help=RUN_REF_HELP)] = "latest",
    json_out: JsonOpt = False,
) -> None:
    """One run (the latest when no id is given): its hosts, and a table of results per host (the roofline figures
    for moe-sweep)."""
    with _store(ctx) as store:
        rid = store.resolve_run_id(run_id)
        run, results = store.get_run(rid), store.results(rid, limit=SHOW_MAX_RESULTS)
    if json_out:
        orphaned = render.orphaned_note(run)
        render.print_json({**run_document(run, results.items, full=True),
                           "orphaned": None if orphaned is None else {"warning": orphaned[0], "hint": orphaned[1]}})
    else:
        render.run_detail(run, results.items)


@app.command("compare")
def compare(
    ctx: typer.Context,
    base: Annotated[str, typer.Argument(help=f"Base run. {RUN_REF_HELP}")],
    head: Annotated[str, typer.Argument(help=f"Head run. {RUN_REF_HELP}")],
    metric: Annotated[str | None, typer.Option(help="Metric to compare; default time_ms, else the first.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Per-case ratio head/base of the medians, the samples of each side (n: base/head), a verdict ('within
    noise' when the stored p10-p90 spread hides the change; 'too few samples: not judged' when a side has fewer
    than 3), and the geometric mean. Runs of different suites, sharing no case, or one run named twice are an
    error (exit 2), as in `orch runs check`."""
    with _store(ctx) as store:
        result = store.compare(store.resolve_run_id(base), store.resolve_run_id(head), metric=metric)
        flagged = {rid: store.flagged_cases(rid) for rid in (result.base, result.head)}
    if json_out:
        render.print_json({**asdict(result), "flagged_cases": {k: [asdict(f) for f in v] for k, v in flagged.items()}})
    else:
        render.comparison_table(result)
        render.flagged_cases_note(result, flagged)


@app.command("label")
def label_run(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help=RUN_REF_HELP)],
    text: Annotated[str, typer.Argument(help="The new label; an empty string removes it.")],
    json_out: JsonOpt = False,
) -> None:
    """Set (or with "" remove) a run's label."""
    check_label(text, 'e.g. orch runs label latest "nightly fp8"')
    with _store(ctx) as store:
        summary = store.set_label(store.resolve_run_id(run_id), text or None)
    if json_out:
        render.print_json(asdict(summary))
    else:
        render.labelled(summary)


@app.command("rm")
def remove_runs(
    ctx: typer.Context,
    run_ids: Annotated[list[str], typer.Argument(help=f"One or more runs. {RUN_REF_HELP}")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete runs with their host runs and results (asks first unless --yes). A running run is refused: cancel it
    first with orch cancel."""
    with _store(ctx) as store:
        ids = list(dict.fromkeys(store.resolve_run_id(r) for r in run_ids))
        runs = [store.get_run(i) for i in ids]
        running = [r for r in runs if r.status in ("pending", "running")]
        if running:
            raise UsageError(
                f"run {short_run_id(running[0].id)} is still {running[0].status}; it is not deleted",
                f"stop it first with orch cancel {short_run_id(running[0].id)}",
            )
        render.runs_to_remove(runs)
        if not yes:
            if not sys.stdin.isatty():
                raise UsageError(
                    "orch runs rm asks for confirmation, and stdin is not a terminal",
                    "pass --yes to delete without asking",
                )
            whose = "its" if len(runs) == 1 else "their"
            if not typer.confirm(f"Delete {counted(len(runs), 'run')} and {whose} results?", default=False):
                render.nothing_removed(runs)  # declined: what was asked, done (exit 0); no host or run failed
                return
        for r in runs:
            store.delete_run(r.id)
    render.removed(runs)


@app.command("logs")
def logs(
    ctx: typer.Context,
    run_id: Annotated[str, typer.Argument(help=RUN_REF_HELP)],
    host: Annotated[str | None, typer.Option("--host", help="Only this host of the run (default: every host).")] = None,
    case: Annotated[
        int | None, typer.Option("--case", min=0, help="Only this case, by its index in the run (default: all).")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0.1, help="Connect deadline per host, s.")
    ] = 10.0,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write each output byte for byte to DIR/HOST/CASE/RUN.STREAM instead "
                     "of printing it (never overwrites a file)."),
    ] = None,  # fmt: skip
    json_out: JsonOpt = False,
) -> None:
    """The full stdout/stderr/output of a command suite's runs, fetched from the hosts that kept them (results
    store excerpts, sizes and sha256). Every file is checked against the size and sha256 stored with its result.
    Exit 1 when a host could not answer or an output is gone from it or changed, 2 for a --case out of range."""
    import asyncio

    from orchestrator.runlogs import check_case, check_keeps_outputs, fetch_logs, save_outputs
    from orchestrator.store.outputs_repo import stored_outputs

    app = app_context(ctx)
    with _store(ctx) as store:
        detail = store.get_run(store.resolve_run_id(run_id))
        stored = stored_outputs(store, detail.id, host)
    check_keeps_outputs(detail.id, detail.suite)  # before the inventory: a moe-sweep run has nothing to fetch
    check_case(detail.id, case, [h.cases_total for h in detail.host_runs if host in (None, h.host)])
    inventory = app.inventory()
    out = asyncio.run(
        fetch_logs(inventory, detail.id, list(detail.hosts), host=host, case=case, timeout_s=timeout, stored=stored)
    )
    saved = save_outputs(out, output) if output is not None else None
    if json_out:
        doc = {"run_id": detail.id, "hosts": [h.to_dict() for h in out]}
        render.print_json(doc if saved is None else {**doc, "saved": [str(p) for p in saved]})
    elif saved is not None:
        render.saved_logs(out, saved)
    else:
        render.run_logs(detail.id, out)
    raise typer.Exit(1 if any(h.error for h in out) else 0)
