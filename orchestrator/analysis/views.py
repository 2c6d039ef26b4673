"""What to plot for stored runs: the headline views of a suite, their traces and roofline reference lines — pure.

One function, ``build_views``, feeds both the dashboard (``GET /api/v1/views``, drawn with Plotly.js) and
``orch runs plot`` (matplotlib), so the two show the same figures.

- **Headline metrics** come from the suite (``SuiteDef.plots``; a YAML suite's declared ``metrics``); a suite
  that declares nothing plots the metrics its results carry, never a metric named like a case parameter.
  Parameters (``M``, ``ep``...) are never plotted as metrics.
- **x** is the suite's ``plot_x`` or sweep axis. It is drawn on a log2 axis when every x is positive and the
  sweep spans at least a factor of 16 with 3+ distinct values (a doubling sweep); ticks are then placed on the
  swept values, labelled as integers, bytes as KiB/MiB/GiB (IEC, 1 KiB = 1024 B).
- **Traces**: one per (run, host, values of the case parameters that differ between the plotted results),
  so one run on two hosts is two traces, and bf16/fp8/int4 runs overlaid are three. Each point is one stored
  result: the metric's median (else its value), p10/p90 when stored, the case's parameters, and the flags of
  its GPU telemetry (``throttled``, ``shared GPU``; ``analysis/telemetry.py``).
- **Reference lines** (``Plot.roof``): ``memory`` — each GPU's datasheet bandwidth (``analysis/gpus.py``, GB/s
  = 1e9 B/s) and each host's measured copy roof (its latest ``hbm-bandwidth`` run, ``analysis/roof.py``);
  ``compute`` — each GPU's dense tensor peak for the dtypes plotted (``GpuSpec.dense_peak_tflops``, TFLOP/s).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from orchestrator.analysis.gpus import GpuSpec, match_gpu
from orchestrator.analysis.roof import metric_center
from orchestrator.errors import UsageError
from orchestrator.suites.registry import Plot, SuiteDef

LOG_SPAN = 16.0  # max/min of x at or above which a sweep is drawn on a log axis
MAX_TICKS = 10
IGNORED_PARAMS = frozenset({"seed"})  # differs per case in some suites but never names a line
X_TITLES = {
    "M": "M, tokens per call",
    "concurrency": "concurrency, sequences",
    "batch": "batch, sequences",
    "size_bytes": "size",
    "tokens": "tokens per step",
}
METRIC_TITLES = {
    "gbps": "achieved bandwidth",
    "gbps_per_gpu": "achieved bandwidth per GPU",
    "tflops": "achieved TFLOP/s",
    "us_per_token": "time per token",
    "time_ms": "time per call",
    "busbw_gbps": "bus bandwidth",
    "algbw_gbps": "algorithm bandwidth",
}


@dataclass(frozen=True, kw_only=True)
class RowIn:
    """One stored ok result as the views read it (a ``ResultRecord`` has these fields)."""

    host: str
    case: Mapping[str, Any]
    metrics: Mapping[str, Mapping[str, Any]]
    info: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class HostIn:
    """A host of a run: ``gpu_name`` as nvidia-smi prints it (host facts), ``roof_gbps`` its measured copy roof."""

    host: str
    gpu_name: str | None = None
    roof_gbps: float | None = None


@dataclass(frozen=True, kw_only=True)
class RunIn:
    run_id: str
    label: str | None
    suite: str
    hosts: Sequence[HostIn]
    rows: Sequence[RowIn]


@dataclass(frozen=True, kw_only=True)
class Point:
    x: float
    y: float
    p10: float | None
    p90: float | None
    case: dict[str, Any]
    flags: list[str] = field(default_factory=list)
    """``throttled: <reason>`` / ``shared GPU: <reason>`` when the case's GPU telemetry saw it."""


@dataclass(frozen=True, kw_only=True)
class Trace:
    name: str
    run_id: str
    host: str
    gpu: str | None
    group: dict[str, Any]
    """The case parameters (besides x) that set this trace apart, e.g. ``{"dtype": "fp8"}``."""
    points: list[Point]


@dataclass(frozen=True, kw_only=True)
class RefLine:
    label: str
    y: float
    kind: Literal["datasheet", "measured", "dense-peak"]
    source: str


@dataclass(frozen=True, kw_only=True)
class Axis:
    title: str
    log: bool
    tickvals: list[float]
    ticktext: list[str]


@dataclass(frozen=True, kw_only=True)
class View:
    metric: str
    unit: str | None
    title: str
    x: str
    x_axis: Axis
    y_title: str
    traces: list[Trace]
    refs: list[RefLine]


@dataclass(frozen=True, kw_only=True)
class RunRef:
    id: str
    label: str | None
    suite: str
    hosts: list[str]


@dataclass(frozen=True, kw_only=True)
class Views:
    suite: str
    runs: list[RunRef]
    views: list[View]
    metrics: list[str]
    """Every metric the runs' results carry (for a picker); the views plot the headline ones."""
    note: str | None = None
    """Why there is no plot, when ``views`` is empty."""


def short_id(run_id: str) -> str:
    """The run's short id as ``orch runs list`` prints it (``store.compute.short_run_id``: the last 8 hex digits,
    more where another run of the store shares them)."""
    from orchestrator.store.compute import short_run_id

    return short_run_id(run_id)


def fmt_bytes(n: float) -> str:
    """``n`` bytes in IEC units with at most 3 significant digits: 8 B, 32 KiB, 1.5 MiB, 8 GiB."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    i = 0
    while abs(n) >= 1024 and i < len(units) - 1:
        n /= 1024
        i += 1
    return f"{n:.3g} {units[i]}"


def fmt_tick(x: float, *, is_bytes: bool) -> str:
    if is_bytes:
        return fmt_bytes(x)
    return f"{int(x):d}" if float(x).is_integer() else f"{x:.3g}"


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def headline(suite: SuiteDef | None, present: Sequence[str], params: set[str]) -> list[Plot]:
    """The plots for a suite whose results carry the metrics ``present`` (in first-seen order): the suite's
    declared plots that are present; a YAML suite's declared metrics; else every present metric that is not
    named like a case parameter."""
    have = set(present)
    if suite is not None and suite.plots:
        return [p for p in suite.plots if p.metric in have]
    if suite is not None and suite.command is not None:
        return [Plot(m.name) for m in suite.command.metrics if m.name in have]
    return [Plot(m) for m in present if m not in params]


def pick_x(suite: SuiteDef | None, rows: Sequence[RowIn]) -> str | None:
    """The x parameter: the suite's ``plot_x`` or sweep axis; else the first numeric case parameter whose
    value varies; None when the results have none (a one-case suite)."""
    if suite is not None and (suite.plot_x or suite.sweep):
        return suite.plot_x or suite.sweep
    seen: dict[str, set[float]] = {}
    for r in rows:
        for k, v in r.case.items():
            n = _num(v)
            if n is not None and k not in IGNORED_PARAMS:
                seen.setdefault(k, set()).add(n)
    for k, values in seen.items():
        if len(values) > 1:
            return k
    return None


def x_axis(x: str, xs: Sequence[float]) -> Axis:
    """Log2 with ticks on the swept values for a doubling sweep; else linear, ticks left to the plotter."""
    is_bytes = x.endswith("bytes")
    title = X_TITLES.get(x, x) + (" (bytes, log2)" if is_bytes else "")
    distinct = sorted(set(xs))
    log = len(distinct) >= 3 and distinct[0] > 0 and distinct[-1] / distinct[0] >= LOG_SPAN
    if not log:
        return Axis(title=title, log=False, tickvals=[], ticktext=[])
    if not is_bytes:
        title += " (log2)"
    step = max(1, math.ceil(len(distinct) / MAX_TICKS))
    ticks = distinct[::step]
    if ticks[-1] != distinct[-1]:  # the last swept value is always labelled
        ticks.append(distinct[-1])
    return Axis(title=title, log=True, tickvals=ticks, ticktext=[fmt_tick(t, is_bytes=is_bytes) for t in ticks])


def _natural(values: Any) -> tuple[tuple[int, float, str], ...]:
    """A sort key that puts numbers in numeric order before text: M=2 before M=16."""
    return tuple((0, n, "") if (n := _num(v)) is not None else (1, 0.0, str(v)) for v in values)


def _flags(info: Mapping[str, Any] | None) -> list[str]:
    if not isinstance(info, Mapping):
        return []
    reason = info.get("throttle_reason")
    out = []
    if info.get("throttled") is True:
        out.append("throttled" + (f": {reason}" if reason else ""))
    if info.get("shared_gpu") is True:
        out.append("shared GPU" + (f": {reason}" if reason else ""))
    return out


def _spec(gpu_name: str | None) -> GpuSpec | None:
    return match_gpu(gpu_name) if gpu_name else None


def _refs(plot: Plot, runs: Sequence[RunIn], traces: Sequence[Trace]) -> list[RefLine]:
    if plot.roof is None:
        return []
    hosts = {(t.run_id, t.host) for t in traces}
    specs: dict[str, GpuSpec] = {}
    roofs: dict[str, float] = {}
    for run in runs:
        for h in run.hosts:
            if (run.run_id, h.host) not in hosts:
                continue
            spec = _spec(h.gpu_name)
            if spec is not None:
                specs.setdefault(spec.key, spec)
            if h.roof_gbps is not None and h.roof_gbps > 0:
                roofs[h.host] = h.roof_gbps
    out: list[RefLine] = []
    if plot.roof == "memory":
        for spec in specs.values():
            out.append(RefLine(label=f"{spec.name} datasheet {spec.mem_bw_gbps:,.0f} GB/s", y=spec.mem_bw_gbps,
                               kind="datasheet", source=spec.source))  # fmt: skip
        for host, gbps in sorted(roofs.items()):
            out.append(RefLine(label=f"{host} measured copy roof {gbps:,.0f} GB/s", y=gbps, kind="measured",
                               source="the host's latest hbm-bandwidth run (device-to-device copy)"))  # fmt: skip
    else:
        dtypes = sorted({str(p.case["dtype"]) for t in traces for p in t.points if "dtype" in p.case})
        for spec in specs.values():
            by_peak: dict[float, list[str]] = {}  # int4 W4A16 runs on the bf16 tensor cores: one line for both
            for dtype in dtypes:
                peak = spec.dense_peak_tflops(dtype)
                if peak is not None:
                    by_peak.setdefault(peak, []).append(dtype)
            for peak, names in by_peak.items():
                out.append(RefLine(label=f"{spec.name} {', '.join(names)} dense peak {peak:,.0f} TFLOP/s", y=peak,
                                   kind="dense-peak", source=spec.peaks_source or spec.source))  # fmt: skip
    return out


def build_views(
    runs: Sequence[RunIn], suite: SuiteDef | None, *, metric: str | None = None, x: str | None = None
) -> Views:
    """The views of ``runs`` (all of one suite, ``suite`` its definition or None when unknown): the headline
    metrics, or only ``metric``; x the suite's axis unless ``x`` names another case parameter.

    Raises:
        UsageError: runs of different suites; ``metric`` or ``x`` not in the results (the message lists the
            ones that are).
    """
    names = {r.suite for r in runs}
    if len(names) > 1:
        raise UsageError(f"runs of different suites ({', '.join(sorted(names))}) cannot share a plot",
                         "plot runs of one suite together")  # fmt: skip
    suite_name = runs[0].suite if runs else (suite.name if suite else "")
    rows = [(run, r) for run in runs for r in run.rows]
    present: dict[str, str | None] = {}
    params: set[str] = set()
    for _, r in rows:
        params.update(r.case)
        for name, m in r.metrics.items():
            if name not in present or present[name] is None:
                present[name] = m.get("unit") if isinstance(m, Mapping) else None
    refs_out = [RunRef(id=r.run_id, label=r.label, suite=r.suite, hosts=[h.host for h in r.hosts]) for r in runs]
    if metric is not None and metric not in present:
        raise UsageError(f"no result of the run(s) has metric {metric!r}",
                         f"metrics stored: {', '.join(present) or 'none'}")  # fmt: skip
    xs_name = x or pick_x(suite, [r for _, r in rows])
    if x is not None and x not in params:
        raise UsageError(f"{x!r} is not a case parameter of the run(s)",
                         f"case parameters: {', '.join(sorted(params)) or 'none'}")  # fmt: skip
    metrics_list = list(present)
    if not rows:
        return Views(suite=suite_name, runs=refs_out, views=[], metrics=[], note="no results stored yet")
    if xs_name is None:
        return Views(suite=suite_name, runs=refs_out, views=[], metrics=metrics_list,
                     note="one case per host: no sweep to plot (see the results table)")  # fmt: skip
    if not any(_num(r.case.get(xs_name)) is not None for _, r in rows):
        numeric = sorted({k for _, r in rows for k, v in r.case.items() if _num(v) is not None})
        if x is not None:
            raise UsageError(f"case parameter {x!r} is not a number in any result: it cannot be an x axis",
                             f"numeric case parameters: {', '.join(numeric) or 'none'}")  # fmt: skip
        return Views(suite=suite_name, runs=refs_out, views=[], metrics=metrics_list,
                     note=f"the results carry no numeric {xs_name!r} to plot against")  # fmt: skip
    plots = [Plot(metric)] if metric is not None else headline(suite, metrics_list, params)
    if metric is not None and suite is not None:
        plots = [next((p for p in suite.plots if p.metric == metric), Plot(metric))]
    # the parameters that set traces apart: those (besides x) whose value differs between the plotted results
    values: dict[str, set[str]] = {}
    for _, r in rows:
        for k, v in r.case.items():
            if k != xs_name and k not in IGNORED_PARAMS:
                values.setdefault(k, set()).add(repr(v))
    splitting = sorted(k for k, vs in values.items() if len(vs) > 1)
    several = len(runs) > 1
    gpu_of = {(run.run_id, h.host): h.gpu_name for run in runs for h in run.hosts}
    views: list[View] = []
    for plot in plots:
        groups: dict[tuple[str, str, tuple[str, ...]], list[Point]] = {}
        group_params: dict[tuple[str, str, tuple[str, ...]], dict[str, Any]] = {}
        for run, r in rows:
            mt = r.metrics.get(plot.metric)
            y = metric_center(mt)
            xv = _num(r.case.get(xs_name))
            if y is None or xv is None or not isinstance(mt, Mapping):
                continue
            gp = {k: r.case.get(k) for k in splitting}
            key = (run.run_id, r.host, tuple(repr(gp[k]) for k in splitting))
            group_params[key] = gp
            groups.setdefault(key, []).append(
                Point(x=xv, y=y, p10=_num(mt.get("p10")), p90=_num(mt.get("p90")), case=dict(r.case),
                      flags=_flags(r.info))  # fmt: skip
            )
        if not groups:
            continue
        order = {run.run_id: i for i, run in enumerate(runs)}
        traces = []
        ranked = {k: (order[k[0]], k[1], _natural(group_params[k].values())) for k in groups}
        for key in sorted(groups, key=ranked.__getitem__):
            rid, host, _ = key
            run = runs[order[rid]]
            parts = [host, *(f"{k}={v}" for k, v in group_params[key].items())]
            if several:
                parts.append(run.label or short_id(rid))
            traces.append(Trace(name=" · ".join(parts), run_id=rid, host=host, gpu=gpu_of.get((rid, host)),
                                group=group_params[key], points=sorted(groups[key], key=lambda p: p.x)))  # fmt: skip
        unit = present.get(plot.metric)
        title = METRIC_TITLES.get(plot.metric, plot.metric)
        views.append(
            View(
                metric=plot.metric,
                unit=unit,
                title=f"{title} vs {xs_name}",
                x=xs_name,
                x_axis=x_axis(xs_name, [p.x for t in traces for p in t.points]),
                y_title=f"{plot.metric} ({unit})" if unit else plot.metric,
                traces=traces,
                refs=_refs(plot, runs, traces),
            )
        )
    note = None if views else "none of the suite's headline metrics is stored"
    return Views(suite=suite_name, runs=refs_out, views=views, metrics=metrics_list, note=note)
