"""Regression gate services (issue 16): ``orch calibrate``, ``orch runs rerun`` and ``orch runs check`` — the run
machinery (``runner.Runner``) driven several times, and the statistical comparison (``store.compare`` with
``analysis.stats``) read between. No rendering here; the CLI draws the returned values.

- ``calibrate``: ``runs`` identical runs of a suite back to back (A/A), then per host, case and metric the
  run-to-run spread of their medians and the within-run spread, stored in ``calibrations``; later comparisons of
  that host and case use it as their noise band.
- ``rerun_request``: the ``RunRequest`` that replays a stored run — same suite, ``--set`` values, preset, repeat
  and seed, on its hosts (or a subset) and for its cases (or a subset); the new run's ``info.replays`` names it.
- ``check``: compare HEAD against BASE; with ``confirm``, rerun the cases called ``slower`` on the same hosts and
  keep only those whose rerun is called ``slower`` against BASE again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from orchestrator.errors import OrchError, UsageError
from orchestrator.inventory import Inventory
from orchestrator.runner import Observer, Runner, RunOutcome, RunRequest
from orchestrator.store.records import CompareCase, Comparison
from orchestrator.store.repo import Store
from orchestrator.store.stats_repo import CalibrationRecord, metric_samples_kind, save_calibration
from orchestrator.suites.registry import Registry

DEFAULT_CALIBRATION_RUNS = 3
WIDE_BAND = 0.50
"""A calibrated band (A/A spread or within-run spread, relative) above this is too wide to be useful: a
comparison would call nothing short of a 50% change, ten times compare's 5% threshold (docs/metrics.md, Noisy
measurements)."""


@dataclass(frozen=True)
class CalibrateOutcome:
    """The calibration runs (ids and statuses) and every stored calibration row."""

    suite: str
    runs: list[RunOutcome]
    calibrations: list[CalibrationRecord]
    skipped: dict[str, str] = field(default_factory=dict)  # metric -> why not calibrated (no samples, constant)

    @property
    def too_wide(self) -> list[CalibrationRecord]:
        """The calibrations whose A/A or within-run spread exceeds ``WIDE_BAND``."""
        return [c for c in self.calibrations if max(c.aa_spread or 0.0, c.within_spread or 0.0) > WIDE_BAND]

    def to_dict(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "runs": [{"run_id": r.run_id, "status": r.status} for r in self.runs],
            "skipped_metrics": self.skipped,
            "too_wide": [{"host": c.host, "case": c.case, "metric": c.metric} for c in self.too_wide],
            "calibrations": [
                {
                    "host": c.host,
                    "case": c.case,
                    "metric": c.metric,
                    "aa_spread": c.aa_spread,
                    "within_spread": c.within_spread,
                    "n_runs": c.n_runs,
                    "medians": c.medians,
                }
                for c in self.calibrations
            ],
        }


def _metric_names(store: Store, run_id: str) -> tuple[list[str], dict[str, str]]:
    """The metrics worth calibrating (their samples vary within a run) and the others with why: a metric with
    no raw samples is derived from the case (bytes, FLOPs), one whose samples never vary is a constant — an A/A
    spread of 0% for either would only look like a quiet host."""
    kinds = metric_samples_kind(store, run_id)
    skipped = {m: k for m, k in kinds.items() if k != "varies"}
    return [m for m, k in kinds.items() if k == "varies"], skipped


async def calibrate(
    inventory: Inventory,
    store: Store,
    req: RunRequest,
    *,
    runs: int = DEFAULT_CALIBRATION_RUNS,
    registry: Registry | None = None,
    observer: Observer | None = None,
) -> CalibrateOutcome:
    """Run ``req`` ``runs`` times back to back (each labelled ``calibration i/N``) and store the A/A spread of
    every metric per host and case from the runs that stored results. Raises UsageError for ``runs`` < 2 and
    OrchError when fewer than two runs stored results."""
    if runs < 2:
        raise UsageError(f"--runs {runs}: a calibration needs at least 2 runs", "e.g. --runs 3 (the default)")
    outcomes: list[RunOutcome] = []
    for i in range(runs):
        label = f"calibration {i + 1}/{runs}" + (f" {req.label}" if req.label else "")
        one = replace(req, label=label)
        outcomes.append(await Runner(inventory, store, one, observer, registry=registry).run())
    usable = [o.run_id for o in outcomes if o.status in ("completed", "partial")]
    if len(usable) < 2:
        raise OrchError(
            f"calibration of {req.suite}: only {len(usable)} of {runs} runs stored results",
            "see why with `orch runs show RUN_ID` for each run, then calibrate again",
        )
    records: list[CalibrationRecord] = []
    metrics, skipped = _metric_names(store, usable[0])
    for metric in metrics:
        records.extend(save_calibration(store, req.suite, metric, usable))
    return CalibrateOutcome(req.suite, outcomes, records, skipped)


def rerun_request(
    store: Store,
    run_id: str,
    *,
    hosts: Sequence[str] | None = None,
    cases: Sequence[dict[str, Any]] = (),
    timeout_s: float = 10.0,
) -> RunRequest:
    """The request that replays stored run ``run_id``: its suite, ``--set`` values, preset, repeat and seed, on
    ``hosts`` (default: the run's hosts; each must be one of them) and only the spec cases holding one of
    ``cases`` (default: all). A host whose stored run names a build must still have it as its current build (else
    that host fails, naming both). Raises NotFoundError, UsageError for a host the run did not use."""
    detail = store.get_run(run_id)
    params = detail.params or {}
    chosen = list(hosts) if hosts else list(detail.hosts)
    unknown = [h for h in chosen if h not in detail.hosts]
    if unknown:
        raise UsageError(
            f"run {detail.id} did not run on {', '.join(unknown)}",
            f"its hosts: {', '.join(detail.hosts)}",
        )
    return RunRequest(
        suite=detail.suite,
        selector=",".join(chosen),
        sets=dict(params.get("sets") or {}),
        preset=detail.preset,
        repeat=params.get("repeat"),
        label=f"rerun of {detail.id[-8:]}",
        seed=params.get("seed"),
        timeout_s=timeout_s,
        replays=detail.id,
        only_cases=tuple(dict(c) for c in cases),
        builds=tuple((h.host, h.build_sha) for h in detail.host_runs if h.host in chosen and h.build_sha),
    )


def parse_cases(store: Store, run_id: str, specs: Sequence[str]) -> list[dict[str, Any]]:
    """``--cases`` values (``KEY=VALUE[,KEY=VALUE...]``, repeatable) as the stored cases of ``run_id`` they
    match (every given key equal, compared as text). Raises UsageError for a malformed spec or one matching
    no stored case."""
    stored = [r.case for r in store.results(run_id, limit=100_000).items]
    out: list[dict[str, Any]] = []
    for spec in specs:
        want: dict[str, str] = {}
        for part in spec.split(","):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"--cases {spec!r} is not KEY=VALUE[,KEY=VALUE]", "for example --cases M=64")
            want[key.strip()] = value.strip()
        hits = [c for c in stored if all(k in c and str(c[k]) == v for k, v in want.items())]
        if not hits:
            raise UsageError(f"--cases {spec!r} matches no case of run {run_id}", f"see them: orch runs show {run_id}")
        out.extend(h for h in hits if h not in out)
    return out


@dataclass(frozen=True)
class CheckOutcome:
    """``comparison``: HEAD against BASE; ``slower``: its cases called slower; with confirm, ``rerun`` (the
    replay of those cases), ``recheck`` (BASE against the rerun) and ``reproduced`` (the slower cases called
    slower again). ``regression`` is the gate: reproduced cases with confirm, else any slower case."""

    comparison: Comparison
    slower: list[CompareCase]
    confirm: bool
    rerun: RunOutcome | None = None
    recheck: Comparison | None = None
    reproduced: list[CompareCase] = field(default_factory=list)

    @property
    def regression(self) -> bool:
        return bool(self.reproduced) if self.confirm else bool(self.slower)

    def to_dict(self) -> dict[str, Any]:
        def case(c: CompareCase) -> dict[str, Any]:
            st = c.stats
            return {
                "host": c.host,
                "case": c.case,
                "ratio": c.ratio,
                "ci": None if st is None else [st.ci_low, st.ci_high],
                "q_value": None if st is None else st.q_value,
                "band": None if st is None else st.band,
            }

        cmp = self.comparison
        return {
            "base": cmp.base,
            "head": cmp.head,
            "metric": cmp.metric,
            "noise_floor": cmp.noise_floor,
            "alpha": cmp.alpha,
            "slower": [case(c) for c in self.slower],
            "confirm": self.confirm,
            "rerun_run_id": self.rerun.run_id if self.rerun else None,
            "rerun_status": self.rerun.status if self.rerun else None,
            "reproduced": [case(c) for c in self.reproduced],
            "not_reproduced": [case(c) for c in self.slower if self.confirm and c not in self._reproduced_sources()],
            "regression": self.regression,
        }

    def _reproduced_sources(self) -> list[CompareCase]:
        keys = {(c.host, c.case_key) for c in self.reproduced}
        return [c for c in self.slower if (c.host, c.case_key) in keys]


def _slower(cmp: Comparison) -> list[CompareCase]:
    return [c for c in cmp.cases if c.stats is not None and c.stats.call == "slower"]


async def check(
    inventory: Inventory | None,
    store: Store,
    head: str,
    base: str,
    *,
    confirm: bool = False,
    metric: str | None = None,
    registry: Registry | None = None,
    observer: Observer | None = None,
    timeout_s: float = 10.0,
) -> CheckOutcome:
    """Compare ``head`` against ``base`` (run ids as stored); with ``confirm``, replay the slower cases of
    ``head`` on their hosts and compare that rerun against ``base``. Raises what ``Store.compare`` raises, and
    OrchError when the rerun stored no result."""
    cmp = store.compare(base, head, metric=metric)
    slower = _slower(cmp)
    if not confirm or not slower:
        return CheckOutcome(cmp, slower, confirm)
    if inventory is None:
        raise UsageError("--confirm reruns cases on the hosts: it needs the inventory", "pass -i INVENTORY")
    hosts = sorted({c.host for c in slower if c.host is not None})
    req = rerun_request(store, head, hosts=hosts or None, cases=[c.case for c in slower], timeout_s=timeout_s)
    rerun = await Runner(inventory, store, req, observer, registry=registry).run()
    if rerun.status not in ("completed", "partial"):
        raise OrchError(
            f"the confirming rerun {rerun.run_id} of run {head} is {rerun.status}: nothing to confirm with",
            f"see why with `orch runs show {rerun.run_id}`",
        )
    recheck = store.compare(base, rerun.run_id, metric=cmp.metric)
    again = {(c.host, c.case_key) for c in _slower(recheck)}
    reproduced = [c for c in recheck.cases if (c.host, c.case_key) in again and any(
        (s.host, s.case_key) == (c.host, c.case_key) for s in slower
    )]
    return CheckOutcome(cmp, slower, confirm, rerun, recheck, reproduced)
