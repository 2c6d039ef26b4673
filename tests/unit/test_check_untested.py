"""``regress.judge_untested``: how ``orch runs check`` treats the cases the rank test cannot judge — pure."""

from __future__ import annotations

from dataclasses import replace

from orchestrator.analysis import stats
from orchestrator.analysis.compare import verdict
from orchestrator.regress import CheckOutcome, judge_untested
from orchestrator.store.records import CompareCase, Comparison


def _case(k: int, ratio: float, *, metric_dir: str = "lower") -> CompareCase:
    v = verdict(ratio, "lower" if metric_dir == "lower" else "higher", 0.05)
    return CompareCase(
        host="h1", case_key=f"k={k}", case={"k": k}, base=10.0, head=10.0 * ratio, ratio=ratio,
        base_p10=None, base_p90=None, head_p10=None, head_p90=None, noisy=None, verdict=v,
    )  # fmt: skip


def _cmp(cases: list[CompareCase], metric: str = "time_ms", unit: str = "ms") -> Comparison:
    return Comparison(base="b", head="h", metric=metric, unit=unit, paired_on="host+case", cases=cases,
                      geomean=None, only_base=0, only_head=0, threshold=0.05, noisy=0)  # fmt: skip


ONE = {("h1", f"k={k}"): 1 for k in range(1, 5)}


def test_samples_needed_is_four_at_five_percent() -> None:
    assert stats.samples_needed() == 4
    assert not stats.underpowered(4, 4) and stats.underpowered(3, 3)
    assert stats.samples_needed(0.01) == 5  # 2 / C(10, 5) = 0.0079; 2 / C(8, 4) = 0.029 > 0.01


def test_without_a_rule_only_compares_regressions_count_and_the_rest_cannot_be_judged() -> None:
    cmp = _cmp([_case(1, 2.0), _case(2, 1.01), _case(3, 0.5)])
    out = {u.case.case["k"]: u for u in judge_untested(cmp, (ONE, ONE), {})}
    assert out[1].outcome == "regression" and out[1].rule == "compare's 5% threshold on the medians"
    assert out[1].why == "1 sample each, the test needs >= 4 per side"
    assert out[1].hint == "rerun both runs with --repeat 4"
    assert out[2].outcome == "cannot judge" and out[2].rule is None
    assert out[3].outcome == "cannot judge"  # 2x faster: not a regression, but not judged either
    gate = CheckOutcome(cmp, [], False, untested=list(out.values()))
    assert (gate.verdict, gate.exit_code) == ("regression", 1)
    gate = CheckOutcome(cmp, [], False, untested=[out[2], out[3]])
    assert (gate.verdict, gate.exit_code) == ("inconclusive", 3)


def test_min_change_decides_on_the_medians_in_the_bad_direction() -> None:
    cmp = _cmp([_case(1, 2.0), _case(2, 1.01), _case(3, 0.5)])
    out = {u.case.case["k"]: u.outcome for u in judge_untested(cmp, (ONE, ONE), {}, min_change=0.05)}
    assert out == {1: "regression", 2: "within", 3: "within"}
    out = {u.case.case["k"]: u.outcome for u in judge_untested(cmp, (ONE, ONE), {}, min_change=0.005)}
    assert out == {1: "regression", 2: "regression", 3: "within"}
    gate = CheckOutcome(cmp, [], False, untested=judge_untested(cmp, (ONE, ONE), {}, min_change=1.5))
    assert (gate.verdict, gate.exit_code) == ("pass", 0)
    # a higher-is-better metric: a drop is the regression
    rate = _cmp([_case(1, 0.9, metric_dir="higher"), _case(2, 1.3, metric_dir="higher")], "gbps", "GB/s")
    out = {u.case.case["k"]: u.outcome for u in judge_untested(rate, (ONE, ONE), {}, min_change=0.05)}
    assert out == {1: "regression", 2: "within"}


def test_a_calibration_decides_beyond_its_band_and_never_below_compares_threshold() -> None:
    cmp = _cmp([_case(1, 1.03), _case(2, 1.08), _case(3, 1.2)])
    cal = {("h1", "k=1"): 0.01, ("h1", "k=2"): 0.10, ("h1", "k=3"): 0.10}
    out = {u.case.case["k"]: u for u in judge_untested(cmp, (ONE, ONE), cal)}
    assert out[1].outcome == "within"  # 3% is beyond the 1% band but within compare's 5%
    assert out[2].outcome == "within" and out[3].outcome == "regression"
    assert out[3].rule == "calibrated band 10.00% (at least compare's 5%) on the medians"
    # --min-change never decides below the calibrated band
    out = {u.case.case["k"]: u.outcome for u in judge_untested(cmp, (ONE, ONE), cal, min_change=0.02)}
    assert out == {1: "regression", 2: "within", 3: "regression"}


def test_unknown_direction_cannot_be_judged_by_any_rule() -> None:
    cmp = _cmp([_case(1, 2.0)], "count", "")
    (u,) = judge_untested(cmp, (ONE, ONE), {}, min_change=0.05)
    assert u.outcome == "cannot judge" and "direction of metric 'count' is unknown" in u.why


def test_uneven_counts_and_tested_cases() -> None:
    st = stats.CaseStats(2.0, 1.9, 2.1, 0.001, 0.001, 0.01, "within-run", "slower", 20, 20)
    tested = _case(2, 2.0)
    cmp = _cmp([_case(1, 2.0), replace(tested, stats=st)])
    (u,) = judge_untested(cmp, ({("h1", "k=1"): 20}, {("h1", "k=1"): 2}), {})
    assert u.case.case["k"] == 1 and u.why == "20 base and 2 head samples, the test needs >= 4 per side"


def test_a_case_too_noisy_to_judge_is_never_passed_without_a_rule() -> None:
    """Call ``noisy`` (a band wider than 50% that holds the interval) and the p10/p90 verdict ``noisy: not
    judged``: cannot judge (exit 3), each saying why; ``--min-change`` decides them on the medians."""
    st = stats.CaseStats(1.01, 0.6, 1.7, 0.8, 0.8, 1.36, "within-run", "noisy", 20, 20)
    tested = replace(_case(1, 1.01), stats=st, verdict="noisy: not judged")
    p10p90 = replace(_case(2, 1.01), verdict="noisy: not judged")
    quiet = replace(_case(3, 1.01), stats=replace(st, band=0.01, call="within noise"), verdict="within noise")
    twenty = {("h1", f"k={k}"): 20 for k in range(1, 4)}
    cmp = _cmp([tested, p10p90, quiet])
    out = {u.case.case["k"]: u for u in judge_untested(cmp, (twenty, twenty), {})}
    assert sorted(out) == [1, 2]  # a judged quiet case is not untested
    assert out[1].outcome == out[2].outcome == "cannot judge"
    assert out[1].why == (
        "too noisy to judge: the noise band 0.424x–2.36x (within-run) is wider than 50% and holds the 95% CI 0.6–1.7"
    )
    assert out[2].why == "too noisy to judge: a side's p10–p90 spread is wider than a 50% band"
    gate = CheckOutcome(cmp, [], False, untested=list(out.values()))
    assert (gate.verdict, gate.exit_code) == ("inconclusive", 3)
    decided = judge_untested(cmp, (twenty, twenty), {}, min_change=0.05)
    assert [u.outcome for u in decided] == ["within", "within"]
