"""Response and request bodies of the results API (pydantic). Built from the store's records, never ORM rows.

Units: ``time_ms`` ms, ``us_per_token`` µs, ``gbps`` GB/s (1e9 B/s), ``tflops`` TFLOP/s, ``pct_*`` percent.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.analysis.compare import Verdict


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class Detail(BaseModel):
    detail: str | list[Any]


class VersionOut(BaseModel):
    """This orch (``orch --version``): ``commit`` is the full git sha (None when not built from git)."""

    version: str
    commit: str | None
    commit_source: str | None = Field(description="'build' (recorded in the wheel), 'checkout' (git) or null")
    dirty: bool | None
    python: str
    asyncssh: str | None
    sqlalchemy: str | None
    agent_sha256: str = Field(description="sha256 of the agent.pyz this orch deploys (hex)")


class Health(BaseModel):
    status: str
    database: str
    schema_revision: str | None
    orch: VersionOut


class HostOut(_Out):
    name: str
    address: str | None
    group: str | None
    labels: dict[str, Any]
    facts: dict[str, Any] | None
    first_seen: datetime
    last_seen: datetime


class RunSummaryOut(_Out):
    id: str
    suite: str
    params: dict[str, Any]
    preset: str | None
    label: str | None
    status: str
    started_by: str
    started_on: str
    started_at: datetime
    finished_at: datetime | None
    hosts: list[str]
    results: int = Field(description="result rows with status ok")
    errors: int = Field(description="result rows with status error (failed cases)")


class RunPage(BaseModel):
    total: int
    limit: int
    offset: int
    items: list[RunSummaryOut]


class HostRunOut(_Out):
    host: str
    status: str
    facts: dict[str, Any] | None
    agent_version: str | None
    build_sha: str | None
    last_seq: int
    results: int
    errors: int
    cases_total: int | None
    done_counts: dict[str, Any] | None
    error: str | None = Field(description="the reason for the host's current status only (null when completed)")
    earlier_errors: list[dict[str, Any]] = Field(
        default_factory=list,
        description="errors of earlier attempts a resume followed again: [{status, error, finished_at}], oldest first",
    )
    log: str | None
    info: dict[str, Any] = Field(description="analysis attached by the runner, e.g. {'plateau': {'M': 256}}")
    started_at: datetime | None
    finished_at: datetime | None
    measured_roof_gbps: float | None = Field(description="latest hbm-bandwidth copy roof of this host, GB/s")
    roof_run_id: str | None = Field(default=None, description="the hbm-bandwidth run that measured that roof")
    roof_measured_at: datetime | None = Field(default=None, description="when that hbm-bandwidth run started")


class RunDetailOut(RunSummaryOut):
    info: dict[str, Any]
    host_runs: list[HostRunOut]


class MetricOut(BaseModel):
    value: float
    unit: str
    median: float | None = None
    p10: float | None = None
    p90: float | None = None
    min: float | None = None
    max: float | None = None
    n: int | None = None
    samples: list[float] | None = None


class ResultOut(_Out):
    host: str
    seq: int
    case_index: int | None
    status: str
    case: dict[str, Any]
    case_key: str
    m: int | None
    concurrency: int | None
    size_bytes: int | None
    metrics: dict[str, MetricOut]
    info: dict[str, Any] | None
    error: str | None
    pct_of_measured_roof: float | None = Field(
        description="gbps / the host's measured copy roof, percent: the host's latest hbm-bandwidth run at query "
        "time (roof_run_id), which may be later than this result"
    )
    roof_note: str | None = Field(
        default=None,
        description="above 100% of the roof, why: a cache-resident working set (the weights stay in the GPU's "
        "cache), e.g. '396% of the copy roof: a cache-resident working set (2.1 MB of weights): ...'",
    )
    roof_run_id: str | None = Field(default=None, description="the hbm-bandwidth run whose roof was used")
    warnings: list[str] = Field(
        default_factory=list, description="why the result is suspect, e.g. '5 of 1000 requests failed (0.5%)'"
    )


class ResultPage(BaseModel):
    run_id: str
    total: int
    limit: int
    offset: int
    items: list[ResultOut]


class SeriesPointOut(_Out):
    x: float
    y: float
    p10: float | None
    p90: float | None


class SeriesLineOut(_Out):
    host: str
    run_id: str
    label: str | None
    started_at: datetime
    points: list[SeriesPointOut]


class SeriesOut(_Out):
    suite: str
    metric: str
    unit: str | None
    x: str
    group_by: str
    lines: list[SeriesLineOut]


class CaseStatsOut(_Out):
    ratio: float | None = Field(description="median(head samples) / median(base samples)")
    ci_low: float | None = Field(description="lower end of the 95% bootstrap interval of the ratio (seeded); null "
                                 "when not finite (a side with values <= 0 resampled to a median of 0)")
    ci_high: float | None = Field(description="upper end of the 95% bootstrap interval of the ratio (seeded); null "
                                  "when not finite")
    p_value: float | None = Field(description="two-sided Mann-Whitney U p-value of the two samples")
    q_value: float | None = Field(description="Benjamini-Hochberg adjusted p-value over the comparison's cases")
    band: float = Field(
        description="relative noise half-width on a log scale: a ratio within 1/(1 + band) .. 1 + band is noise"
    )
    band_source: str = Field(description="calibration (orch calibrate's A/A spread) or within-run")
    call: str = Field(
        description="slower | faster | within noise | noisy (not judged: band > 50%) | n/a (docs/statistics.md)"
    )
    n_base: int
    n_head: int


class CompareCaseOut(_Out):
    host: str | None
    case_key: str
    case: dict[str, Any]
    base: float
    head: float
    ratio: float | None = Field(description="head / base of the medians")
    base_p10: float | None = Field(description="base's 10th percentile (None when not stored)")
    base_p90: float | None = Field(description="base's 90th percentile (None when not stored)")
    head_p10: float | None = Field(description="head's 10th percentile (None when not stored)")
    head_p90: float | None = Field(description="head's 90th percentile (None when not stored)")
    noisy: bool | None = Field(
        description="the change is within the measurement noise: with raw samples tested (`stats`), the test did not "
        "call it (`stats.call` is not slower/faster); otherwise the p10-p90 ranges overlap, or either side's "
        "ln(p90 / p10) exceeds |ln ratio|; null when a side has no p10/p90"
    )
    verdict: Verdict = Field(
        description="by the metric's direction and `threshold`; `within noise` when noisy, `noisy: not judged` "
        "when noisy and a side's band sqrt(p90 / p10) - 1 exceeds 50%, `too few samples: not judged` when a side "
        "has fewer than 3 samples (`n_base`, `n_head`), `n/a` when the "
        "direction (lower or higher is better) is unknown"
    )
    warnings: list[str] = Field(
        default_factory=list, description="a side whose result had failed requests, e.g. 'head: 5 failed requests'"
    )
    stats: CaseStatsOut | None = Field(
        default=None, description="statistics from the raw samples; null when a side stored none"
    )
    wide: list[str] = Field(
        default_factory=list,
        description="the sides (base, head) whose (p90 - p10) / median exceeds 0.20: a noisy measurement "
        "(docs/metrics.md, Noisy measurements)",
    )
    n_base: int | None = Field(
        default=None, description="base's samples of the case (raw samples, else the metric's n); null when unknown"
    )
    n_head: int | None = Field(default=None, description="head's samples of the case; null when unknown")


class ComparisonOut(_Out):
    base: str
    head: str
    metric: str
    unit: str | None
    paired_on: str
    cases: list[CompareCaseOut]
    geomean: float | None
    only_base: int
    only_head: int
    threshold: float = Field(description="relative change beyond which a clear change is a regression or improvement")
    noisy: int = Field(
        description="how many cases have `noisy` true (p10/p90 hide the change); the verdicts shown are `verdicts`"
    )
    warned: int = Field(default=0, description="how many cases have a warning (failed requests on a side)")
    noise_floor: str | None = Field(
        default=None,
        description="where the noise bands came from: calibration, within-run samples only, or why none was tested",
    )
    slower: int = Field(default=0, description="cases called slower (a regression) at false discovery rate alpha")
    faster: int = Field(default=0, description="cases called faster at false discovery rate alpha")
    alpha: float | None = Field(default=None, description="false discovery rate of the calls (Benjamini-Hochberg)")
    verdicts: dict[str, int] = Field(
        default_factory=dict,
        description="how many cases have each verdict (regression, improvement, unchanged, within noise, "
        "noisy: not judged, too few samples: not judged, n/a): "
        "the counts of the cases' `verdict`, as the CLI's summary prints them",
    )
    wide_cases: int = Field(default=0, description="how many cases have a noisy side (`wide` not empty)")


class LabelIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    label: str | None = Field(default=None, max_length=255, pattern=r"^[^\x00-\x1f\x7f]*$")


class ProjectionOut(_Out):
    """One stored ``orch project`` result: ``inputs`` holds every figure the formula used (and the formula),
    ``rows`` = ``{"projected": [per M: source_ms, f_mem, moe_ms, allreduce_us, overhead_ms, step_ms,
    tokens_per_s, overhead_share], "checked": [per M: predicted_ms, measured_ms, error_pct]}``."""

    id: str
    created_at: datetime
    source_run_id: str
    overheads_run_id: str | None
    check_run_id: str | None
    source_gpu: str
    target_gpu: str
    dtype: str
    params: dict[str, Any]
    inputs: dict[str, Any]
    rows: dict[str, Any]


class ProjectionPage(BaseModel):
    total: int
    limit: int
    offset: int
    items: list[ProjectionOut]


class StoredFileOut(BaseModel):
    bytes: int = Field(description="size the host measured when the case ended, bytes")
    sha256: str


class OutputFileOut(BaseModel):
    text: str = Field(description="the whole file: itself when `encoding` is utf-8, its base64 when base64")
    encoding: Literal["utf-8", "base64"] = Field(
        description="utf-8: the file is valid UTF-8 and `text` is it; base64: it is not, and `text` is its base64"
    )
    bytes: int = Field(description="size on the host now, bytes")
    sha256: str = Field(description="of the file on the host now")
    check: Literal["ok", "changed", "unrecorded"] = Field(
        description="against the size and sha256 stored with the result: ok (equal), changed (either differs), "
        "unrecorded (no stored result names this file, e.g. a case that failed)"
    )
    stored: StoredFileOut | None = Field(default=None, description="what the stored result recorded, if any")


class MissingFileOut(BaseModel):
    case_index: int
    run: int = Field(description="timed run of the case, from 0")
    stream: str = Field(description="stdout, stderr or output")
    bytes: int = Field(description="stored size, bytes")
    sha256: str = Field(description="stored sha256")


class RunOutputsOut(BaseModel):
    run: int = Field(description="timed run of the case, from 0")
    stdout: OutputFileOut | None = None
    stderr: OutputFileOut | None = None
    output: OutputFileOut | None = Field(default=None, description="the {output} file, for tools that write one")


class CaseOutputsOut(BaseModel):
    case_index: int
    runs: list[RunOutputsOut]
    not_read: str | None = Field(
        default=None, description="what is in the place of the case's outputs directory on the host when that is "
        "not a real directory (e.g. 'a symbolic link'): nothing of the case was read"
    )


class HostLogsOut(BaseModel):
    host: str
    cases: list[CaseOutputsOut]
    error: str | None = Field(
        description="why this host could not answer (the others still do), or that outputs are gone or changed"
    )
    hint: str | None = None
    missing: list[MissingFileOut] = Field(description="stored outputs the host no longer has")
    problems: list[str] = Field(description="one line per case with gone outputs and per changed file")
    not_read: str | None = Field(
        default=None, description="what is in the place of the run's outputs/ directory on the host when that is "
        "not a real directory: nothing under it was read"
    )


class RunLogsOut(BaseModel):
    run_id: str
    hosts: list[HostLogsOut]


class ChangePointOut(_Out):
    """A change point in one (suite, host, case, metric) series ordered by run start time (Apache Otava's
    e-divisive means, docs/statistics.md)."""

    suite: str
    host: str
    case_key: str
    case: dict[str, Any]
    metric: str
    run_id: str = Field(description="the first run after the change")
    run_started_at: datetime
    position: int = Field(description="index of run_id in the series, from 0")
    before: float = Field(description="mean of the series before the change (the metric's unit)")
    after: float = Field(description="mean of the series from run_id on until the next change")
    change: float | None = Field(description="after / before - 1")
    p_value: float | None = Field(description="t-test p-value of the split")
    detected_at: datetime
