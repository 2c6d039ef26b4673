"""``orch project --run MOE_RUN --to SKU``: a measured moe-sweep projected onto another GPU, with the per-step
budget of fixed costs from an overheads run; ``--check RUN`` compares with a real run on the target."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer

from orchestrator.analysis.projection import ALLREDUCES_PER_LAYER, KERNELS_PER_LAYER
from orchestrator.cli import render
from orchestrator.cli.context import app_context
from orchestrator.store.compute import RUN_REF_FORMS


def project(
    ctx: typer.Context,
    run: Annotated[str, typer.Option("--run", help=f"The moe-sweep run to project from: {RUN_REF_FORMS}.")],
    to: Annotated[str, typer.Option("--to", help="Target GPU: a catalog key (b300, rtx-pro-6000-server, h200...).")],
    overheads: Annotated[
        str | None, typer.Option(
            "--overheads", help=f"An overheads run of the source host, the per-step budget: {RUN_REF_FORMS}."
        )
    ] = None,
    layers: Annotated[int, typer.Option(min=1, help="MoE layers per decode step (Kimi-K2: 61).")] = 61,
    roof: Annotated[
        str, typer.Option(help="Bandwidths: datasheet or measured (copy roofs; needs --target-roof).")
    ] = "datasheet",
    target_roof: Annotated[
        float | None, typer.Option("--target-roof", min=1, help="Target's measured copy roof, GB/s (--roof measured).")
    ] = None,
    allreduces_per_layer: Annotated[
        int, typer.Option(min=0, help="All-reduces per layer (tensor parallel).")
    ] = ALLREDUCES_PER_LAYER,
    kernels_per_layer: Annotated[
        int, typer.Option(min=0, help="Kernels per layer, each costing graph_node_us.")
    ] = KERNELS_PER_LAYER,
    overhead_scale: Annotated[
        float, typer.Option(min=0, help="Factor on the source's fixed costs on the target (1: kept as is).")
    ] = 1.0,
    allreduce: Annotated[
        str, typer.Option("--allreduce", help="All-reduce rows to use: graph or eager.")
    ] = "graph",
    check: Annotated[
        str | None, typer.Option(
            "--check", help=f"A moe-sweep run on the target, predicted vs measured per M: {RUN_REF_FORMS}."
        )
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")] = False,
) -> None:
    """Project a measured MoE sweep onto another GPU; the formula and every input are printed with it."""
    from orchestrator.projection_service import ProjectRequest, run_projection  # lazy: SQLAlchemy

    req = ProjectRequest(
        run=run,
        to=to,
        overheads=overheads,
        layers=layers,
        roof=roof,
        target_roof_gbps=target_roof,
        allreduces_per_layer=allreduces_per_layer,
        kernels_per_layer=kernels_per_layer,
        overhead_scale=overhead_scale,
        allreduce_mode=allreduce,
        check=check,
    )
    store = app_context(ctx).store()
    try:
        outcome = run_projection(store, req)
    finally:
        store.close()
    if json_out:
        render.print_json(asdict(outcome.record))
    else:
        render.projection(outcome.record)
