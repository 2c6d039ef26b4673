"""Plain values the store returns (never ORM objects). Units: times are aware UTC datetimes; metric values
keep the unit stored with them (``time_ms`` in ms, ``gbps`` in GB/s = 1e9 bytes/s, ``tflops`` in TFLOP/s)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from orchestrator.analysis.casestats import CaseStats
from orchestrator.analysis.compare import Verdict, verdict_counts

# The states a run, a host's run and a result may be in (the models' CHECK constraints use these; kept here, with
# the plain values, so that the CLI can name them without importing SQLAlchemy).
RUN_STATUSES = ("pending", "running", "completed", "partial", "failed", "cancelled")
HOST_RUN_STATUSES = ("pending", "running", "completed", "failed", "cancelled")
RESULT_STATUSES = ("ok", "error")
# A host run's ``info`` key holding the errors of its earlier, ended attempts (``Store.reopen_host_run``): its
# ``error`` is only the reason for its current status. At most EARLIER_ERRORS_MAX are kept (the newest).
EARLIER_ERRORS_KEY = "earlier_errors"
EARLIER_ERRORS_MAX = 20

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class HostRecord:
    name: str
    address: str | None
    group: str | None
    labels: dict[str, Any]
    facts: dict[str, Any] | None
    first_seen: datetime
    last_seen: datetime


@dataclass(frozen=True, kw_only=True)
class RunSummary:
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
    results: int
    errors: int
    controller: dict[str, Any] | None = None  # info.controller: the orch process driving it (orchestrator.controller)


@dataclass(frozen=True, kw_only=True)
class HostRunRecord:
    """One host's part of a run. ``info`` is what the runner attached after analysis, e.g.
    ``{"plateau": {"m": 256, "metric": "time_ms"}}``; ``measured_roof_gbps`` is the host's latest
    hbm-bandwidth copy roof, when it has one."""

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
    error: str | None
    log: str | None
    info: dict[str, Any]
    started_at: datetime | None
    finished_at: datetime | None
    measured_roof_gbps: float | None = None
    roof_run_id: str | None = None  # the hbm-bandwidth run that measured measured_roof_gbps
    roof_measured_at: datetime | None = None  # when that run started

    @property
    def earlier_errors(self) -> list[dict[str, Any]]:
        """The errors of this host run's earlier attempts that ended before a resume followed it again, oldest
        first: ``[{"status": "failed", "error": "...", "finished_at": ISO 8601 UTC}]``; empty when none."""
        got = (self.info or {}).get(EARLIER_ERRORS_KEY)
        return [e for e in got if isinstance(e, dict)] if isinstance(got, list) else []


@dataclass(frozen=True, kw_only=True)
class RunDetail(RunSummary):
    info: dict[str, Any] = field(default_factory=dict)
    host_runs: list[HostRunRecord] = field(default_factory=list)

    def host_run(self, host: str) -> HostRunRecord | None:
        return next((h for h in self.host_runs if h.host == host), None)


@dataclass(frozen=True, kw_only=True)
class HostRunState:
    """What ``orch run --resume`` needs per host: follow from ``last_seq + 1`` unless its ``done`` line is stored;
    ``started``: the agent was started on the host (else there is no spool to reattach to)."""

    host: str
    status: str
    last_seq: int
    done: bool = False
    started: bool = False


@dataclass(frozen=True, kw_only=True)
class ResultRecord:
    run_id: str
    host: str
    seq: int
    case_index: int | None
    status: str
    case: dict[str, Any]
    case_key: str
    m: int | None
    concurrency: int | None
    size_bytes: int | None
    metrics: dict[str, dict[str, Any]]
    info: dict[str, Any] | None
    error: str | None
    pct_of_measured_roof: float | None = None
    roof_note: str | None = None  # above 100% of the roof: why (analysis.roof.above_roof_note)
    roof_run_id: str | None = None  # the hbm-bandwidth run whose roof pct_of_measured_roof used (at query time)

    @property
    def warnings(self) -> list[str]:
        """What makes the result suspect though it was stored (``info.warnings``, e.g. "5 of 1000 requests
        failed (0.5%)" from a serving benchmark)."""
        w = self.info.get("warnings") if isinstance(self.info, dict) else None
        return [str(x) for x in w] if isinstance(w, list) else []


@dataclass(frozen=True, kw_only=True)
class Page(Generic[T]):
    items: list[T]
    total: int
    limit: int
    offset: int


@dataclass(frozen=True, kw_only=True)
class RunFilter:
    suite: str | None = None
    host: str | None = None
    status: str | None = None
    label: str | None = None
    since: datetime | None = None
    until: datetime | None = None


@dataclass(frozen=True, kw_only=True)
class SeriesPoint:
    x: float
    y: float
    p10: float | None
    p90: float | None


@dataclass(frozen=True, kw_only=True)
class SeriesLine:
    host: str
    run_id: str
    label: str | None
    started_at: datetime
    points: list[SeriesPoint]


@dataclass(frozen=True, kw_only=True)
class Series:
    suite: str
    metric: str
    unit: str | None
    x: str
    group_by: str
    lines: list[SeriesLine]


@dataclass(frozen=True, kw_only=True)
class CompareCase:
    host: str | None
    case_key: str
    case: dict[str, Any]
    base: float
    head: float
    ratio: float | None
    base_p10: float | None
    base_p90: float | None
    head_p10: float | None
    head_p90: float | None
    noisy: bool | None
    verdict: Verdict
    warnings: list[str] = field(default_factory=list)
    stats: CaseStats | None = None
    wide: list[str] = field(default_factory=list)  # "base"/"head": the side whose spread is noisy (is_wide)
    n_base: int | None = None  # samples per side (raw samples, else the metric's n); None when not known
    n_head: int | None = None


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """Per-case ratio of medians ``head / base`` (> 1: head is larger — slower for a time, faster for GB/s).

    ``paired_on`` is ``host+case`` when the runs share hosts (only shared hosts are compared) and ``case``
    when they do not (different machines: the median over each run's hosts per case).

    Per case, ``base_p10``..``head_p90`` are the p10/p90 of each side (over several results of a case: the
    lowest p10 and the highest p90; None when any lacks one), ``noisy`` and ``verdict`` are
    ``analysis.compare.is_noisy`` and ``noise_verdict`` at ``threshold`` — or, once raw samples are tested
    (``store.stats_repo.with_statistics``), the test's call and whether it was not called; ``noisy`` counts the
    noisy cases.
    A case's ``warnings`` name the side whose result had failed requests (``failed_requests`` > 0: its latencies
    describe another load); ``warned`` counts those cases.

    With raw samples on both sides a case also has ``stats`` (``analysis.stats.CaseStats``: Mann–Whitney p,
    BH q, bootstrap interval of the ratio, noise band, call) and its ``verdict`` follows the call (slower →
    regression, faster → improvement, within noise); ``noise_floor`` says where the bands came from
    (``calibration``, ``within-run samples only``, or why no case was tested); ``slower``/``faster`` count the
    calls at false discovery rate ``alpha``.

    ``verdicts`` counts the cases per verdict (``analysis.compare.verdict_counts``), computed from ``cases``
    whenever the record is built or replaced: what a summary prints is what the table shows. A case's ``wide``
    names the sides whose p10–p90 spread exceeds ``analysis.compare.WIDE_SPREAD`` of the median (noisy
    measurements); ``wide_cases`` counts those cases.
    """

    base: str
    head: str
    metric: str
    unit: str | None
    paired_on: str
    cases: list[CompareCase]
    geomean: float | None
    only_base: int
    only_head: int
    threshold: float
    noisy: int
    warned: int = 0
    noise_floor: str | None = None
    slower: int = 0
    faster: int = 0
    alpha: float | None = None
    verdicts: dict[str, int] = field(init=False, default_factory=dict)
    wide_cases: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdicts", verdict_counts([c.verdict for c in self.cases]))
        object.__setattr__(self, "wide_cases", sum(1 for c in self.cases if c.wide))


@dataclass(frozen=True, kw_only=True)
class FlaggedCase:
    """A result whose GPU telemetry saw throttling or another process on the GPU (results.info, set by
    analysis/telemetry.py): its host, case key and parameters, the two flags and the reason text."""

    host: str
    case_key: str
    case: dict[str, Any]
    throttled: bool
    shared_gpu: bool
    reason: str | None
