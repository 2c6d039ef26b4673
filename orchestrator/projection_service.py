"""``orch project``: read the stored runs, build the projection's inputs, project, check, store.

The formula is ``analysis/projection.py``'s; this module only gathers its inputs from the store and the GPU
catalog, and refuses (``ProjectionError``, exit 2) what it cannot project: a source run that is not a one-host
moe-sweep, an unknown target, a dtype without a dense peak on either SKU, ``--roof measured`` without both
hosts' copy roofs, an overheads run of another suite, a check run of another shape or dtype.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from orchestrator.analysis import gpus, roofline
from orchestrator.analysis.projection import (
    Budget,
    CheckRow,
    Overheads,
    Projection,
    Sku,
    SourcePoint,
    check,
    project,
)
from orchestrator.analysis.roof import metric_center
from orchestrator.errors import ProjectionError
from orchestrator.store.compute import short_run_id
from orchestrator.store.projections import ProjectionRecord, save_projection
from orchestrator.store.records import ResultRecord, RunDetail
from orchestrator.store.repo import Store

MOE_SUITES = ("moe-sweep",)
SHAPE_KEYS = ("E", "H", "I", "k", "shared", "dtype")
MAX_RESULTS = 100_000


@dataclass(frozen=True)
class ProjectRequest:
    run: str
    to: str
    overheads: str | None = None
    layers: int = 61
    roof: str = "datasheet"
    target_roof_gbps: float | None = None
    allreduces_per_layer: int = 2
    kernels_per_layer: int = 8
    overhead_scale: float = 1.0
    allreduce_mode: str = "graph"
    check: str | None = None


@dataclass(frozen=True)
class ProjectOutcome:
    record: ProjectionRecord
    projection: Projection
    checked: list[CheckRow]


def target_spec(name: str) -> gpus.GpuSpec:
    """The catalog entry for ``--to``: a catalog key (``b300``) or an nvidia-smi name."""
    for known in gpus.CATALOG:
        if known.key == name.strip().lower():
            return known
    spec = gpus.match_gpu(name)
    if spec is None:
        raise ProjectionError(
            f"unknown target GPU {name!r}",
            f"--to takes a catalog key: {', '.join(s.key for s in gpus.CATALOG)}",
        )
    return spec


def _run(store: Store, ref: str, what: str, suites: tuple[str, ...]) -> tuple[RunDetail, list[ResultRecord]]:
    run = store.get_run(store.resolve_run_id(ref))
    if run.suite not in suites:
        raise ProjectionError(
            f"{what} {run.id} is a {run.suite} run",
            f"{what} must be a {' or '.join(suites)} run (`orch runs list --suite {suites[0]}`)",
        )
    hosts = sorted({h.host for h in run.host_runs})
    if len(hosts) != 1:
        raise ProjectionError(
            f"{what} {run.id} ran on {len(hosts)} hosts ({', '.join(hosts)})",
            "project from a run of one host (orch run ... --hosts ONE_HOST)",
        )
    results = [r for r in store.results(run.id, limit=MAX_RESULTS).items if r.status == "ok"]
    if not results:
        raise ProjectionError(f"{what} {run.id} has no successful result", "pick a run that completed")
    return run, results


def _source_spec(run: RunDetail, results: list[ResultRecord]) -> gpus.GpuSpec:
    facts = run.host_runs[0].facts or {}
    name = facts.get("gpu_name")
    spec = gpus.match_gpu(name) if isinstance(name, str) else None
    if spec is None:  # the runner's own match, stored with each result
        key = (results[0].info or {}).get("gpu_spec")
        spec = next((s for s in gpus.CATALOG if s.key == key), None)
    if spec is None and not name:  # no GPU among the host's facts and no catalog match on any result
        from orchestrator.store.compute import short_run_id

        short, host = short_run_id(run.id), run.host_runs[0].host
        raise ProjectionError(
            f"run {short} has no GPU: it ran on {host}, a CPU host (its facts list no GPU), so there is no GPU "
            "to project from",
            f"project from a run on a GPU host (`orch runs list --host HOST`); {host}'s results are in "
            f"`orch runs show {short}`",
        )
    if spec is None:
        raise ProjectionError(
            f"run {run.id}: the GPU {name!r} is not in orch's catalog", "project from a run on a known GPU"
        )
    return spec


def _shape(r: ResultRecord) -> dict[str, Any]:
    return {k: r.case.get(k) for k in SHAPE_KEYS}


def _median(r: ResultRecord, metric: str) -> float | None:
    return metric_center(r.metrics.get(metric))


def _points(run_id: str, results: list[ResultRecord]) -> tuple[list[SourcePoint], dict[str, Any]]:
    shape = _shape(results[0])
    points = []
    for r in results:
        if _shape(r) != shape:
            raise ProjectionError(
                f"run {short_run_id(run_id)} mixes layer shapes or dtypes", "project from a run of one shape"
            )
        t, wb = _median(r, "time_ms"), metric_center(r.metrics.get("weight_bytes"))
        if t is None or wb is None:
            raise ProjectionError(
                f"run {short_run_id(run_id)}, M={r.case.get('M')}: no time_ms or weight_bytes",
                "re-run moe-sweep with this orch",
            )
        M = int(r.case["M"])
        flops = roofline.flops(M, int(shape["k"]), int(shape["shared"]), int(shape["H"]), int(shape["I"]))
        points.append(SourcePoint(M=M, time_ms=t, weight_bytes=wb, flops=flops))
    return points, shape


def _sku(spec: gpus.GpuSpec, dtype: str, bw: float, bw_source: str) -> Sku:
    peak = spec.dense_peak_tflops(dtype)
    if peak is None:
        raise ProjectionError(
            f"{spec.name} has no dense tensor peak for {dtype} in orch's catalog",
            "the compute-bound part scales by the dense peak ratio; project another dtype or add the figure",
        )
    field_name = {"fp8": "fp8_dense_tflops"}.get(dtype, "bf16_dense_tflops")
    return Sku(
        key=spec.key,
        bw_gbps=bw,
        bw_source=bw_source,
        peak_tflops=peak,
        peak_source=f"{field_name} of {spec.name} ({spec.source})",
    )


def _overheads(store: Store, ref: str, mode: str) -> Overheads:
    run, results = _run(store, ref, "--overheads", ("overheads",))
    m = results[0].metrics
    node = metric_center(m.get("graph_node_us"))
    if node is None:
        raise ProjectionError(f"--overheads {run.id} has no graph_node_us (a CPU host?)", "use a GPU host's run")
    prefix = f"allreduce_{mode}_M"
    ar = {
        int(k[len(prefix) : -3]): v
        for k in m
        if k.startswith(prefix) and k.endswith("_us") and (v := metric_center(m[k])) is not None
    }
    return Overheads(node_us=node, allreduce_us=dict(sorted(ar.items())), allreduce_mode=mode, run_id=run.id)


def _measured(store: Store, ref: str, shape: Mapping[str, Any]) -> tuple[str, dict[int, float]]:
    run, results = _run(store, ref, "--check", MOE_SUITES)
    other = _shape(results[0])
    if other != dict(shape):
        raise ProjectionError(
            f"--check {run.id} has another layer shape or dtype: {other} vs {dict(shape)}",
            "check against a run of the same shape and dtype on the target",
        )
    return run.id, {int(r.case["M"]): t for r in results if (t := _median(r, "time_ms")) is not None}


def run_projection(store: Store, req: ProjectRequest) -> ProjectOutcome:
    """Project ``req.run`` onto ``req.to``, optionally check, and store the result. Raises ProjectionError,
    NotFoundError."""
    if req.roof not in ("datasheet", "measured"):
        raise ProjectionError(f"--roof {req.roof!r}", "--roof takes datasheet or measured")
    if req.allreduce_mode not in ("graph", "eager"):
        raise ProjectionError(f"--allreduce {req.allreduce_mode!r}", "--allreduce takes graph or eager")
    run, results = _run(store, req.run, "--run", MOE_SUITES)
    src_spec = _source_spec(run, results)  # first: a CPU run has no GPU to project from, whatever its results
    points, shape = _points(run.id, results)
    dtype = str(shape["dtype"])
    tgt_spec = target_spec(req.to)
    if req.roof == "datasheet":
        src_bw, src_bw_source = src_spec.mem_bw_gbps, f"datasheet ({src_spec.source})"
        tgt_bw, tgt_bw_source = tgt_spec.mem_bw_gbps, f"datasheet ({tgt_spec.source})"
    else:
        roof = run.host_runs[0].measured_roof_gbps
        if roof is None or req.target_roof_gbps is None:
            raise ProjectionError(
                "--roof measured needs both copy roofs: "
                + ("the source host has no hbm-bandwidth run" if roof is None else "no --target-roof given"),
                "run `orch run hbm-bandwidth` on the source host and give the target's with --target-roof GB/s, "
                "or use --roof datasheet",
            )
        src_bw, src_bw_source = roof, f"measured copy roof of {run.host_runs[0].host} (hbm-bandwidth)"
        tgt_bw, tgt_bw_source = req.target_roof_gbps, "--target-roof"
    source = _sku(src_spec, dtype, src_bw, src_bw_source)
    target = _sku(tgt_spec, dtype, tgt_bw, tgt_bw_source)
    over = _overheads(store, req.overheads, req.allreduce_mode) if req.overheads else None
    budget = Budget(
        layers=req.layers,
        allreduces_per_layer=req.allreduces_per_layer,
        kernels_per_layer=req.kernels_per_layer,
        overhead_scale=req.overhead_scale,
    )
    try:
        proj = project(points, source, target, dtype, budget, over)
    except ValueError as exc:
        raise ProjectionError(f"cannot project run {run.id}: {exc}", "check --layers and the counts") from None
    checked: list[CheckRow] = []
    check_id = None
    if req.check:
        check_id, measured = _measured(store, req.check, shape)
        checked = check(proj, measured)
        if not checked:
            raise ProjectionError(f"--check {check_id} shares no M with run {run.id}", "sweep the same M values")
    inputs = proj.as_dict()
    inputs.pop("rows")
    inputs["points"] = [asdict(p) for p in points]
    inputs["shape"] = dict(shape)
    record = save_projection(
        store,
        source_run_id=run.id,
        overheads_run_id=over.run_id if over else None,
        check_run_id=check_id,
        source_gpu=source.key,
        target_gpu=target.key,
        dtype=dtype,
        params={k: v for k, v in asdict(req).items() if k not in ("run", "overheads", "check")},
        inputs=inputs,
        rows={"projected": [asdict(r) for r in proj.rows], "checked": [asdict(c) for c in checked]},
    )
    return ProjectOutcome(record=record, projection=proj, checked=checked)
