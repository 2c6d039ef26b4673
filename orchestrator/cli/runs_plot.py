"""``orch runs plot RUN [RUN...] [--metric M] [--x X] -o FILE.png|.svg``: the dashboard's views of stored runs
(rooflines for moe-sweep), overlaid, drawn by matplotlib into a file (``orchestrator/figures.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from orchestrator.cli import render
from orchestrator.cli.context import app_context
from orchestrator.store.compute import RUN_REF_FORMS

RUN_REFS_HELP = f"Runs to overlay, each: {RUN_REF_FORMS}."


def plot(
    ctx: typer.Context,
    runs: Annotated[list[str], typer.Argument(help=RUN_REFS_HELP)],
    output: Annotated[Path, typer.Option("--output", "-o", help="File to write: .png (120 dpi) or .svg.")],
    metric: Annotated[
        str | None, typer.Option("--metric", help="One metric; default the suite's headline views.")
    ] = None,
    x: Annotated[str | None, typer.Option("--x", help="Case parameter on x; default the suite's sweep axis.")] = None,
    suite_dir: Annotated[
        list[Path] | None,
        typer.Option("--suite-dir", help="Directory of user suite files (*.yaml), repeatable; also ORCH_SUITE_DIR."),
    ] = None,
) -> None:
    """Plot stored runs of one suite: moe-sweep's achieved GB/s against the datasheet and the measured copy roof,
    TFLOP/s against the dtype's dense peak, µs/token and ms per call, one line per host and run."""
    from orchestrator import figures
    from orchestrator.views_service import run_views, suite_def

    figures.check_output(output)  # before any work: a wrong suffix is a usage error
    app = app_context(ctx)
    registry = app.registry(suite_dir or [])
    store = app.store(create=False)
    try:
        views = run_views(store, runs, registry=registry, metric=metric, x=x)
    finally:
        store.close()
    drawn = figures.write(views, output)
    render.plot_written(output, views, drawn)
    if metric is None and suite_def(views.suite, registry) is None:  # its declared `plot:` is unknown here
        render.plot_suite_not_loaded(views.suite, drawn)
