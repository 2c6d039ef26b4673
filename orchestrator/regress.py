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
from typing import Any, Literal

from orchestrator.analysis.compare import NOT_JUDGED_BAND
from orchestrator.analysis.stats import ALPHA
from orchestrator.errors import IncomparableError, OrchError, UsageError
from orchestrator.inventory import Inventory
from orchestrator.runner import Observer, Runner, RunOutcome, RunRequest
from orchestrator.store.compute import short_run_id
from orchestrator.store.coverage_repo import CaseRef, Coverage, coverage
from orchestrator.store.records import CompareCase, Comparison
from orchestrator.store.repo import Store
from orchestrator.store.stats_repo import (
    CalibrationRecord,
    calibrations,
    metric_samples_kind,
    sample_counts,
    save_calibration,
)
from orchestrator.suites.registry import Registry

DEFAULT_CALIBRATION_RUNS = 3
WIDE_BAND = NOT_JUDGED_BAND
"""A calibrated band (A/A spread or within-run spread, relative) above this (0.50) is too wide to be useful: a
comparison would call nothing short of a 50% change, ten times compare's 5% threshold (docs/metrics.md, Noisy
measurements); a case whose band is that wide is ``noisy: not judged`` (``analysis.compare.NOT_JUDGED_BAND``)."""


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
            f"run {short_run_id(detail.id)} did not run on {', '.join(unknown)}",
            f"its hosts: {', '.join(detail.hosts)}",
        )
    return RunRequest(
        suite=detail.suite,
        selector=",".join(chosen),
        sets=dict(params.get("sets") or {}),
        preset=detail.preset,
        repeat=params.get("repeat"),
        label=f"rerun of {short_run_id(detail.id)}",
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
            raise UsageError(f"--cases {spec!r} matches no case of run {short_run_id(run_id)}",
                             f"see them: orch runs show {short_run_id(run_id)}")
        out.extend(h for h in hits if h not in out)
    return out


EXIT_REGRESSION = 1
EXIT_INCOMPLETE = 1
"""``orch runs check``'s exit status when HEAD lacks cases BASE measured, or has failed cases, and
``--allow-missing`` was not given: a gate that judged only what is left would pass a run that lost cases."""
EXIT_INCONCLUSIVE = 3
"""``orch runs check``'s exit status when no case is a regression but some case could not be judged (too few
samples for the rank test, no direction for the metric) and no decision rule on the medians applies: a gate
that cannot judge must not pass (docs/statistics.md, "orch runs check")."""

Outcome = Literal["regression", "within", "cannot judge"]


@dataclass(frozen=True)
class Untested:
    """A case of the comparison that the statistics could not test (call ``n/a``) and how the gate treated it.

    ``n_base``/``n_head``: measurements per side (``stats_repo.sample_counts``); ``why``: why the test could
    not judge it; ``outcome``: ``regression`` or ``within`` when a rule on the medians alone decided (``rule``
    names it: an explicit ``--min-change``, a stored calibration's A/A band, or compare's 5% threshold when
    that already calls a regression), else ``cannot judge``; ``hint``: what would let the test judge it."""

    case: CompareCase
    n_base: int
    n_head: int
    why: str
    outcome: Outcome
    rule: str | None
    hint: str

    def to_dict(self) -> dict[str, Any]:
        c = self.case
        return {
            "host": c.host,
            "case": c.case,
            "ratio": c.ratio,
            "n_base": self.n_base,
            "n_head": self.n_head,
            "why": self.why,
            "outcome": self.outcome,
            "rule": self.rule,
            "hint": self.hint,
        }


def _end(x: float | None) -> str:
    """An end of a bootstrap interval for a message: ``?`` where it is not known (not finite)."""
    return "?" if x is None else f"{x:.3g}"


def _samples_text(n_base: int, n_head: int) -> str:
    if n_base == n_head:
        return f"{n_base} sample{'s' if n_base != 1 else ''} each"
    return f"{n_base} base and {n_head} head samples"


def judge_untested(
    cmp: Comparison,
    counts: tuple[dict[tuple[str | None, str], int], dict[tuple[str | None, str], int]],
    calibrated: dict[tuple[str | None, str], float],
    *,
    min_change: float | None = None,
    alpha: float = ALPHA,
) -> list[Untested]:
    """The cases of ``cmp`` without a statistical call (``stats`` None, call ``n/a`` or ``noisy``), each judged on its
    medians where a rule allows it — pure.

    ``counts``: (base, head) measurements per (host, case_key); ``calibrated``: the stored A/A band (relative)
    per (host, case_key). Rules, first that applies: ``min_change`` (relative, e.g. 0.10) given → a change of
    the ratio beyond ``max(min_change, calibrated band)`` in the bad direction is a regression, else within;
    a calibration stored → beyond ``max(band, cmp.threshold)`` is a regression, else within; otherwise compare's
    own verdict (``cmp.threshold`` on the medians, p10/p90 noise) when it is ``regression``; anything else
    ``cannot judge``. A metric of unknown direction, or a case without a ratio, cannot be judged at all."""
    from orchestrator.analysis.compare import metric_direction
    from orchestrator.analysis.stats import MIN_SAMPLES, samples_needed, underpowered

    direction = metric_direction(cmp.metric, cmp.unit or "")
    need = samples_needed(alpha)
    out: list[Untested] = []
    for c in cmp.cases:
        if c.stats is not None and c.stats.call not in ("n/a", "noisy"):
            continue
        key = (c.host, c.case_key)
        nb, nh = counts[0].get(key, 0), counts[1].get(key, 0)
        if direction is None:
            why = f"the direction of metric {cmp.metric!r} is unknown (no time or rate unit)"
            hint = "pick a time or rate metric with --metric"
        elif c.ratio is None:
            why = "the base median is not positive: no ratio"
            hint = "compare a metric with positive values (--metric)"
        elif c.stats is not None and c.stats.call == "noisy":
            lo, hi = 1.0 / (1.0 + c.stats.band), 1.0 + c.stats.band
            why = (
                f"too noisy to judge: the noise band {lo:.3g}x–{hi:.3g}x ({c.stats.band_source}) is wider than "
                f"{NOT_JUDGED_BAND:.0%} and holds the 95% CI {_end(c.stats.ci_low)}–{_end(c.stats.ci_high)}"
            )
            hint = "rerun both runs on a quieter host or with more --repeat, or calibrate (orch calibrate)"
        elif c.verdict == "noisy: not judged":
            why = f"too noisy to judge: a side's p10–p90 spread is wider than a {NOT_JUDGED_BAND:.0%} band"
            hint = "rerun both runs on a quieter host or with more --repeat"
        elif min(nb, nh) < MIN_SAMPLES or underpowered(nb, nh, alpha):
            why = f"{_samples_text(nb, nh)}, the test needs >= {need} per side"
            hint = f"rerun both runs with --repeat {need}"
        elif c.stats is None:
            why = "no raw samples stored for the test (p10/p90 only)"
            hint = "rerun both runs with this orch (it stores every sample)"
        else:
            why = "the rank test could not be applied (a median is not positive)"
            hint = "compare a metric with positive values (--metric)"
        outcome: Outcome = "cannot judge"
        rule: str | None = None
        band = calibrated.get(key)
        if direction is not None and c.ratio is not None:
            change = c.ratio - 1.0 if direction == "lower" else 1.0 - c.ratio
            if min_change is not None:
                limit = max(min_change, band or 0.0)
                rule = f"--min-change {min_change:.2%} on the medians" + (
                    f" (calibrated band {band:.2%})" if band is not None and band > min_change else ""
                )
                outcome = "regression" if change > limit else "within"
            elif band is not None:
                limit = max(band, cmp.threshold)
                rule = f"calibrated band {band:.2%} (at least compare's {cmp.threshold:.0%}) on the medians"
                outcome = "regression" if change > limit else "within"
            elif _medians_verdict(c, direction, cmp.threshold) == "regression":
                rule = f"compare's {cmp.threshold:.0%} threshold on the medians"
                outcome = "regression"
        out.append(Untested(c, nb, nh, why, outcome, rule, hint))
    return out


def _medians_verdict(c: CompareCase, direction: Any, threshold: float) -> str:
    """Compare's verdict of a case on its medians and p10/p90 (``analysis.compare.noise_verdict``), also for a case
    compare left ``too few samples: not judged``: the rule ``runs check`` applies to what the test cannot judge."""
    from orchestrator.analysis.compare import TOO_FEW, is_noisy, noise_verdict, too_noisy

    if c.verdict != TOO_FEW:
        return c.verdict
    sides = (c.base, c.base_p10, c.base_p90, c.head, c.head_p10, c.head_p90)
    return noise_verdict(c.ratio, direction, is_noisy(*sides), threshold, too_noisy(*sides))


@dataclass(frozen=True)
class CheckOutcome:
    """``comparison``: HEAD against BASE; ``slower``: its cases called slower; with confirm, ``rerun`` (the
    replay of the flagged cases), ``recheck`` (BASE against the rerun) and ``reproduced`` (the flagged cases
    called slower again, by the test or by the same rule on the medians). ``untested``: the cases the test
    could not judge (see ``judge_untested``); those whose ``outcome`` is ``regression`` are flagged too.

    The gate (``verdict``/``exit_code``): ``regression`` (exit 1) when a flagged case stands (with confirm:
    is reproduced); else ``inconclusive`` (exit 3) when some case ``cannot judge``; else ``pass`` (exit 0)."""

    comparison: Comparison
    slower: list[CompareCase]
    confirm: bool
    rerun: RunOutcome | None = None
    recheck: Comparison | None = None
    reproduced: list[CompareCase] = field(default_factory=list)
    untested: list[Untested] = field(default_factory=list)
    min_change: float | None = None
    coverage: Coverage | None = None
    allow_missing: bool = False

    @property
    def missing(self) -> list[CaseRef]:
        """BASE's cases HEAD has no ok result of (``coverage_repo.coverage``)."""
        return list(self.coverage.missing) if self.coverage else []

    @property
    def failed(self) -> list[CaseRef]:
        """HEAD's failed cases (error rows naming a case)."""
        return list(self.coverage.failed) if self.coverage else []

    @property
    def incomplete(self) -> bool:
        """HEAD lacks cases or has failed cases, and ``--allow-missing`` was not given."""
        return bool(self.missing or self.failed) and not self.allow_missing

    @property
    def by_medians(self) -> list[Untested]:
        """The untested cases that a rule on the medians calls a regression."""
        return [u for u in self.untested if u.outcome == "regression"]

    @property
    def flagged(self) -> list[CompareCase]:
        """Every case the first comparison calls a regression: called slower, or by a rule on the medians."""
        return [*self.slower, *(u.case for u in self.by_medians)]

    @property
    def cannot_judge(self) -> list[Untested]:
        return [u for u in self.untested if u.outcome == "cannot judge"]

    @property
    def regression(self) -> bool:
        return bool(self.reproduced) if self.confirm else bool(self.flagged)

    @property
    def verdict(self) -> Literal["regression", "incomplete", "inconclusive", "pass"]:
        if self.regression:
            return "regression"
        if self.incomplete:
            return "incomplete"
        return "inconclusive" if self.cannot_judge else "pass"

    @property
    def exit_code(self) -> int:
        codes = {"regression": EXIT_REGRESSION, "incomplete": EXIT_INCOMPLETE, "inconclusive": EXIT_INCONCLUSIVE}
        return codes.get(self.verdict, 0)

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
            "min_change": self.min_change,
            "slower": [case(c) for c in self.slower],
            "untested": [u.to_dict() for u in self.untested],
            "missing": [m.to_dict() for m in self.missing],
            "failed": [f.to_dict() for f in self.failed],
            "allow_missing": self.allow_missing,
            "confirm": self.confirm,
            "rerun_run_id": self.rerun.run_id if self.rerun else None,
            "rerun_status": self.rerun.status if self.rerun else None,
            "reproduced": [case(c) for c in self.reproduced],
            "not_reproduced": [case(c) for c in self.flagged if self.confirm and c not in self._reproduced_sources()],
            "regression": self.regression,
            "verdict": self.verdict,
            "exit_code": self.exit_code,
        }

    def _reproduced_sources(self) -> list[CompareCase]:
        keys = {(c.host, c.case_key) for c in self.reproduced}
        return [c for c in self.flagged if (c.host, c.case_key) in keys]


def _slower(cmp: Comparison) -> list[CompareCase]:
    return [c for c in cmp.cases if c.stats is not None and c.stats.call == "slower"]


def _untested(store: Store, cmp: Comparison, min_change: float | None) -> list[Untested]:
    """``judge_untested`` with the sample counts and calibrations read from the store."""
    if all(c.stats is not None and c.stats.call not in ("n/a", "noisy") for c in cmp.cases):
        return []
    by_host = cmp.paired_on == "host+case"
    counts = (
        sample_counts(store, cmp.base, cmp.metric, by_host=by_host),
        sample_counts(store, cmp.head, cmp.metric, by_host=by_host),
    )
    cal: dict[tuple[str | None, str], float] = {}
    if by_host:
        suite = store.get_run(cmp.base).suite
        rows = calibrations(store, suite, cmp.metric)
        cal = {(r.host, r.case_key): r.aa_spread for r in rows if r.aa_spread is not None}
    return judge_untested(cmp, counts, cal, min_change=min_change)


async def check(
    inventory: Inventory | None,
    store: Store,
    head: str,
    base: str,
    *,
    confirm: bool = False,
    metric: str | None = None,
    min_change: float | None = None,
    allow_missing: bool = False,
    registry: Registry | None = None,
    observer: Observer | None = None,
    timeout_s: float = 10.0,
) -> CheckOutcome:
    """Compare ``head`` against ``base`` (run ids as stored); cases the test cannot judge go through
    ``judge_untested`` (``min_change``: relative, e.g. 0.10, or None). With ``confirm``, replay the flagged
    cases of ``head`` on their hosts and compare that rerun against ``base`` the same way. Raises UsageError for
    a run compared with itself or a negative ``min_change``, what ``Store.compare`` raises, and OrchError when
    the rerun stored no result or HEAD measured no case at all (a run failure, exit 1, naming its failed cases).

    Completeness (``coverage_repo.coverage``): BASE's cases HEAD lacks and HEAD's failed cases make the verdict
    ``incomplete`` (exit 1) unless ``allow_missing``; they are reported either way."""
    if head == base:
        raise UsageError(
            f"orch runs check: HEAD and --base are the same run ({short_run_id(head)}): a run compared with itself "
            "shows nothing",
            "pass the candidate as HEAD and an earlier run as --base: `orch runs check latest --base latest~1`",
        )
    if min_change is not None and not (0.0 <= min_change < 10.0):
        raise UsageError(f"--min-change {min_change}: not a relative change", "e.g. --min-change 0.05 for 5%")
    try:
        cmp = store.compare(base, head, metric=metric)
    except IncomparableError:
        _raise_if_head_measured_nothing(store, base, head, metric)
        raise
    cov = coverage(store, base, head, cmp.metric)
    slower = _slower(cmp)
    untested = _untested(store, cmp, min_change)
    first = CheckOutcome(cmp, slower, confirm, untested=untested, min_change=min_change, coverage=cov,
                         allow_missing=allow_missing)  # fmt: skip
    flagged = first.flagged
    if not confirm or not flagged:
        return first
    if inventory is None:
        raise UsageError("--confirm reruns cases on the hosts: it needs the inventory", "pass -i INVENTORY")
    hosts = sorted({c.host for c in flagged if c.host is not None})
    req = rerun_request(store, head, hosts=hosts or None, cases=[c.case for c in flagged], timeout_s=timeout_s)
    rerun = await Runner(inventory, store, req, observer, registry=registry).run()
    if not rerun.run_id:  # every host failed before starting: no run stored
        why = "; ".join(f"{h.host}: {h.error}" for h in rerun.hosts)
        raise OrchError(f"the confirming rerun of run {short_run_id(head)} stored nothing: every host failed before "
                        f"starting ({why})",
                        "fix the hosts (orch doctor) and run the check again")
    if rerun.status not in ("completed", "partial"):
        raise OrchError(
            f"the confirming rerun {short_run_id(rerun.run_id)} of run {short_run_id(head)} is {rerun.status}: "
            "nothing to confirm with",
            f"see why with `orch runs show {short_run_id(rerun.run_id)}`",
        )
    recheck = store.compare(base, rerun.run_id, metric=cmp.metric)
    again_outcome = CheckOutcome(recheck, _slower(recheck), False, untested=_untested(store, recheck, min_change))
    again = {(c.host, c.case_key) for c in again_outcome.flagged}
    wanted = {(c.host, c.case_key) for c in flagged}
    reproduced = [c for c in recheck.cases if (c.host, c.case_key) in again and (c.host, c.case_key) in wanted]
    return CheckOutcome(cmp, slower, confirm, rerun, recheck, reproduced, untested, min_change, cov, allow_missing)


def _case_text(ref: CaseRef) -> str:
    params = " ".join(f"{k}={v}" for k, v in ref.case.items() if k != "seed")
    return f"{ref.host} {params}" if ref.host else params


def _raise_if_head_measured_nothing(store: Store, base: str, head: str, metric: str | None) -> None:
    """A HEAD run of BASE's suite with no ok result at all while BASE has some failed as a run: OrchError
    (exit 1) naming its failed cases, not the usage error "share no case" (exit 2)."""
    if store.get_run(base).suite != store.get_run(head).suite:
        return
    cov = coverage(store, base, head, None)
    if cov.head_cases or not cov.base_cases:
        return
    failed = "; ".join(f"{_case_text(f)}: {f.error or 'error'}" for f in cov.failed[:5])
    more = f" (and {len(cov.failed) - 5} more)" if len(cov.failed) > 5 else ""
    raise OrchError(
        f"head run {short_run_id(head)} measured none of the {cov.base_cases} cases of base run {short_run_id(base)}"
        + (f"; {len(cov.failed)} failed: {failed}{more}" if cov.failed else ""),
        f"a run that measured nothing cannot pass the gate; see why with `orch runs show {short_run_id(head)}`",
    )
