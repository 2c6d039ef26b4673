"""Response bodies of the dashboard's plot and flag endpoints (``routes/views.py``); the records they document are
``analysis.views.Views`` and ``store.records.FlaggedCase``. Units: a view's ``unit`` is its metric's stored unit
(GB/s = 1e9 B/s, TFLOP/s, ms, µs); reference lines are in the same unit."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class PointOut(BaseModel):
    x: float
    y: float = Field(description="the metric's median (else its value)")
    p10: float | None
    p90: float | None
    case: dict[str, Any] = Field(description="the case's parameters")
    flags: list[str] = Field(description="'throttled: reason' / 'shared GPU: reason' from the case's GPU telemetry")


class TraceOut(BaseModel):
    name: str
    run_id: str
    host: str
    gpu: str | None = Field(description="the host's GPU name as nvidia-smi prints it")
    group: dict[str, Any] = Field(description="the case parameters besides x that set this trace apart")
    points: list[PointOut]


class RefLineOut(BaseModel):
    label: str
    y: float
    kind: Literal["datasheet", "measured", "dense-peak"]
    source: str


class AxisOut(BaseModel):
    title: str
    log: bool = Field(description="log2 axis: a doubling sweep")
    tickvals: list[float]
    ticktext: list[str]


class ViewOut(BaseModel):
    metric: str
    unit: str | None
    title: str
    x: str
    x_axis: AxisOut
    y_title: str
    traces: list[TraceOut]
    refs: list[RefLineOut] = Field(description="datasheet peak, measured copy roof or dense tensor peak lines")


class RunRefOut(BaseModel):
    id: str
    label: str | None
    suite: str
    hosts: list[str]


class ViewsOut(BaseModel):
    suite: str
    runs: list[RunRefOut]
    views: list[ViewOut]
    metrics: list[str] = Field(description="every metric the runs' results carry")
    note: str | None = Field(description="why there is no plot, when views is empty")


class FlaggedCaseOut(BaseModel):
    host: str
    case_key: str
    case: dict[str, Any]
    throttled: bool
    shared_gpu: bool
    reason: str | None


class RunFlagsOut(BaseModel):
    run_id: str
    cases: list[FlaggedCaseOut] = Field(description="results whose GPU telemetry saw throttling or another process")
    fleet_differences: list[dict[str, Any]] = Field(
        description="fields in which the run's hosts differed when it started (the fleet view it stored)"
    )
