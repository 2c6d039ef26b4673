"""sweep_plateau: plateau_from_m (experts touched, time within tol of the plateau level) and
compute_bound_from_m (the time leaves the level upward), on the recorded H200 sweep and constructed ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.analysis.plateau import NO_PLATEAU, SweepPoint, expected_touched, moe_points, sweep_plateau

FIX = Path(__file__).parents[1] / "fixtures" / "h200" / "moe" / "events.jsonl"
KIMI = {"E": 384, "k": 8, "shared": 1}


def _h200() -> list[SweepPoint]:
    events = [json.loads(line) for line in FIX.read_text().splitlines()]
    return moe_points((e["case"], e["metrics"]) for e in events if e["type"] == "result")


def _kimi(times: dict[int, float]) -> list[SweepPoint]:
    """Points of a kimi-k2 layer sweep without a measured routing (expected touched experts)."""
    return moe_points(({"M": m, **KIMI}, {"time_ms": {"value": t}}) for m, t in times.items())


def test_h200_bf16_sweep_plateau_from_128_compute_bound_from_4096() -> None:
    """Issue 11 item 3: 9.8-10.9 ms from M=128 to 1024, 11.3 and 12.2 ms at 2048/4096; was 'plateau from 2048'."""
    pts = _h200()
    assert [p.m for p in pts] == [2**i for i in range(13)]
    assert [p.touched for p in pts][-6:] == [363, 383, 385, 385, 385, 385] and pts[0].experts == 385
    p = sweep_plateau(pts)
    assert (p.plateau_from_m, p.compute_bound_from_m, p.reason) == (128, 4096, None)
    assert p.level_ms == pytest.approx(10.5999, abs=1e-3)  # M=512: the first point with all 385 experts touched
    assert p.to_dict()["plateau_from_m"] == 128
    # the same sweep with the expected D(M) instead of the measured routing: the same figures
    expected = _kimi({q.m: q.time_ms for q in pts})
    assert (sweep_plateau(expected).plateau_from_m, sweep_plateau(expected).compute_bound_from_m) == (128, 4096)
    # a tighter band: M=128 (9.76 ms) is more than 5% under the level, 2048 (11.31) more than 5% over
    assert (sweep_plateau(pts, tol=0.05).plateau_from_m, sweep_plateau(pts, tol=0.05).compute_bound_from_m) == (
        256,
        2048,
    )


def test_issue5_reference_shape_on_h200_stays_on_its_plateau() -> None:
    p = sweep_plateau(_kimi({1: 0.30, 8: 1.77, 64: 7.8, 256: 10.3, 512: 10.4, 1024: 10.4, 2048: 10.5, 4096: 10.5}))
    assert (p.plateau_from_m, p.compute_bound_from_m, p.level_ms) == (256, None, 10.4)


def test_a_ramp_has_no_plateau_within_the_sweep() -> None:
    """The tiny preset's shape on a CPU: the time doubles with M; it never names its last point."""
    tiny = {"E": 16, "k": 4, "shared": 1}
    ramp = moe_points(({"M": 2**i, **tiny}, {"time_ms": {"value": 0.2 * 2**i}}) for i in range(7))
    p = sweep_plateau(ramp)
    assert (p.plateau_from_m, p.compute_bound_from_m, p.level_ms) == (None, None, None)
    assert p.reason == f"{NO_PLATEAU} (the time per call never stays flat between two points)"


def test_a_sweep_that_stops_before_every_expert_is_touched_has_no_plateau() -> None:
    p = sweep_plateau(_kimi({1: 0.35, 8: 1.88, 16: 3.3, 32: 5.4, 64: 7.96}))
    assert (
        p.plateau_from_m is None
        and p.reason == f"{NO_PLATEAU} (the routed experts are not all touched by its largest M)"
    )
    # flat but not yet touching the experts (e.g. launch-bound): still not the memory-bound plateau
    assert sweep_plateau(_kimi({1: 1.0, 2: 1.0, 4: 1.0})).plateau_from_m is None


def test_a_plateau_that_starts_at_the_first_point() -> None:
    """Few experts, many tokens: every expert touched from the first M; flat, then compute-bound."""
    small = {"E": 8, "k": 8, "shared": 0}
    rows = [({"M": m, **small}, {"time_ms": {"median": t, "value": t}}) for m, t in
            {64: 2.0, 128: 2.05, 256: 2.1, 512: 2.6, 1024: 4.9}.items()]  # fmt: skip
    p = sweep_plateau(moe_points(rows))
    assert (p.plateau_from_m, p.compute_bound_from_m, p.level_ms) == (64, 512, 2.0)


def test_without_expert_counts_every_point_counts_as_touched() -> None:
    pts = [SweepPoint(1, 5.0), SweepPoint(2, 5.2), SweepPoint(4, 5.1), SweepPoint(8, 9.0)]
    p = sweep_plateau(pts)
    assert (p.plateau_from_m, p.compute_bound_from_m) == (1, 8)
    assert (
        sweep_plateau([SweepPoint(16, 3.0)]).reason
        == f"{NO_PLATEAU} (the time per call never stays flat between two points)"
    )
    assert sweep_plateau([]).reason == f"{NO_PLATEAU} (no points)"


def test_a_spike_above_the_band_inside_the_sweep_is_where_compute_starts() -> None:
    pts = [SweepPoint(1, 10.0), SweepPoint(2, 10.2), SweepPoint(4, 11.5), SweepPoint(8, 10.1)]
    assert sweep_plateau(pts).compute_bound_from_m == 4  # the first point that leaves the level upward


def test_expected_touched_is_d_of_m() -> None:
    assert expected_touched(1, 384, 8) == pytest.approx(8)
    assert expected_touched(128, 384, 8) == pytest.approx(384 * (1 - (1 - 8 / 384) ** 128))
    assert 384 - expected_touched(512, 384, 8) < 0.5 < 384 - expected_touched(256, 384, 8)


@pytest.mark.parametrize(
    ("points", "tol", "match"),
    [
        ([SweepPoint(1, 1.0)], -0.1, r"tol must be in \[0, 1\)"),
        ([SweepPoint(1, 0.0), SweepPoint(2, 1.0)], 0.1, "time at M=1 must be positive"),
        ([SweepPoint(1, 1.0), SweepPoint(1, 1.1)], 0.1, "M=1 appears more than once"),
    ],
)
def test_rejects(points: list[SweepPoint], tol: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        sweep_plateau(points, tol)
    with pytest.raises(ValueError, match="need 0 < k <= E"):
        expected_touched(1, 4, 8)


# --- the edges each figure turns on (issue 19: mutation testing; values worked out by hand in the comments) ---


def test_to_dict_is_the_stored_and_served_shape() -> None:
    """``Plateau.to_dict`` is what the runner stores in the host run's info and ``orch runs show --json`` prints."""
    p = sweep_plateau([SweepPoint(1, 5.0), SweepPoint(2, 5.1), SweepPoint(4, 9.0)])
    assert p.to_dict() == {
        "plateau_from_m": 1,
        "compute_bound_from_m": 4,  # 9.0 > 1.1 * 5.0 = 5.5
        "level_ms": 5.0,
        "metric": "time_ms",
        "tol": 0.1,
        "reason": None,
    }
    none = sweep_plateau([SweepPoint(1, 1.0), SweepPoint(2, 2.0)], tol=0.25)
    assert none.to_dict() == {
        "plateau_from_m": None,
        "compute_bound_from_m": None,
        "level_ms": None,
        "metric": "time_ms",
        "tol": 0.25,
        "reason": f"{NO_PLATEAU} (the time per call never stays flat between two points)",
    }


def test_every_result_carries_the_tol_it_was_judged_with() -> None:
    assert sweep_plateau([], tol=0.2).tol == 0.2
    assert sweep_plateau([SweepPoint(1, 1.0), SweepPoint(2, 2.0)], tol=0.2).tol == 0.2  # no plateau
    assert sweep_plateau([SweepPoint(1, 1.0), SweepPoint(2, 1.1)], tol=0.2).tol == 0.2  # a plateau


def test_tol_bounds_zero_accepted_one_refused() -> None:
    # tol = 0: only equal times are flat; 4.0 at M=4 is the level, 4.0 at M=8 stays on it, 4.5 leaves it
    flat = [SweepPoint(1, 1.0), SweepPoint(2, 2.0), SweepPoint(4, 4.0), SweepPoint(8, 4.0), SweepPoint(16, 4.5)]
    p = sweep_plateau(flat, tol=0.0)
    assert (p.plateau_from_m, p.compute_bound_from_m, p.level_ms, p.tol) == (4, 16, 4.0, 0.0)
    for tol in (1.0, 1.5):
        with pytest.raises(ValueError, match=rf"tol must be in \[0, 1\), got {tol}"):
            sweep_plateau(flat, tol=tol)


def test_the_last_two_points_can_be_the_plateau() -> None:
    # the ramp doubles to M=4, then 4.0 -> 4.1 ms (within 10% of 4.0): the level is the second-to-last point
    p = sweep_plateau([SweepPoint(1, 1.0), SweepPoint(2, 2.0), SweepPoint(4, 4.0), SweepPoint(8, 4.1)])
    assert (p.plateau_from_m, p.compute_bound_from_m, p.level_ms) == (4, None, 4.0)


def test_the_band_edge_is_inside_the_band() -> None:
    # tol = 0.5, level 2.0 ms: the band is [1.0, 3.0] ms, both ends exact in binary floating point
    p = sweep_plateau([SweepPoint(1, 2.0), SweepPoint(2, 3.0)], tol=0.5)
    assert (p.plateau_from_m, p.compute_bound_from_m, p.level_ms) == (1, None, 2.0)  # |3 - 2| = 1 <= 0.5 * 2
    above = [SweepPoint(1, 2.0), SweepPoint(2, 3.0), SweepPoint(4, 3.5)]
    assert sweep_plateau(above, tol=0.5).compute_bound_from_m == 4  # 3.5 - 2.0 > 1.0
    # walking back from the level point (M=2: the first with every expert touched): M=1 at 1.0 ms, 9.5 of 10
    # experts (covered: 9.5 >= 0.5 * 10), |1.0 - 2.0| = 1.0 <= 0.5 * 2.0: on the plateau
    edge = [SweepPoint(1, 1.0, 9.5, 10), SweepPoint(2, 2.0, 10, 10), SweepPoint(4, 2.0, 10, 10)]
    assert sweep_plateau(edge, tol=0.5).plateau_from_m == 1


def test_a_point_at_the_band_edge_by_rounding_is_not_where_compute_starts() -> None:
    """One band for both figures: a next point that made the pair flat is never also the compute-bound start.

    a = 205.94792838825992, b = 247.13751406591192, tol = 0.2: b - a = 41.18958567765199 = 0.2·a in floating
    point (flat), while (1 + 0.2)·a rounds to 247.1375140659119 < b — judged with that product, b was "above the
    band" and the sweep read "plateau from M=1, compute-bound from M=2" on two points."""
    a, b = 205.94792838825992, 247.13751406591192
    p = sweep_plateau([SweepPoint(1, a), SweepPoint(2, b)], tol=0.2)
    assert (p.plateau_from_m, p.compute_bound_from_m, p.level_ms) == (1, None, a)


def test_walking_back_takes_covered_points_within_the_band_only() -> None:
    # M=1: 9.5 of 10 experts (covered at tol 0.1: 9.5 >= 9.0; not all touched: 10 - 9.5 = 0.5, not < 0.5), so
    # the level point is M=2 (10.2 ms; M=4 at 10.3 within 1.02 of it); M=1's 10.0 ms is within 1.02: on the plateau
    p = sweep_plateau([SweepPoint(1, 10.0, 9.5, 10), SweepPoint(2, 10.2, 10, 10), SweepPoint(4, 10.3, 10, 10)])
    assert (p.plateau_from_m, p.level_ms) == (1, 10.2)
    # M=1 flat (10.0 ms, within 1.01 of the level 10.1) but only 5 of 10 experts touched: not the plateau
    p = sweep_plateau([SweepPoint(1, 10.0, 5, 10), SweepPoint(2, 10.1, 10, 10), SweepPoint(4, 10.2, 10, 10)])
    assert (p.plateau_from_m, p.level_ms) == (2, 10.1)
    # M=1 covered (9.5 of 10) but at 5.0 ms, far under the level 10.0: the plateau starts at the level point
    p = sweep_plateau([SweepPoint(1, 5.0, 9.5, 10), SweepPoint(2, 10.0, 10, 10), SweepPoint(4, 10.1, 10, 10)])
    assert (p.plateau_from_m, p.level_ms) == (2, 10.0)
    # the level point is the first point, the last one in its band: the walk stops at the first point
    p = sweep_plateau([SweepPoint(1, 5.0), SweepPoint(2, 5.1)])
    assert (p.plateau_from_m, p.compute_bound_from_m, p.level_ms) == (1, None, 5.0)


def test_covered_and_all_touched() -> None:
    """covered(tol): touched >= (1 - tol)·experts; all_touched: experts - touched < 0.5; True without counts."""
    for counts in ((None, 10), (3.0, None), (None, None)):
        point = SweepPoint(1, 1.0, *counts)
        assert point.covered(0.1) and point.all_touched()
    assert not SweepPoint(1, 1.0, 5.0, 10).covered(0.1)  # 5 < 0.9 * 10
    assert SweepPoint(1, 1.0, 5.0, 10).covered(0.5)  # 5 >= 0.5 * 10 = 5.0 exactly
    assert not SweepPoint(1, 1.0, 4.5, 10).covered(0.5)
    assert not SweepPoint(1, 1.0, 9.5, 10).all_touched()  # 10 - 9.5 = 0.5 is not < 0.5
    assert SweepPoint(1, 1.0, 9.6, 10).all_touched()
    assert not SweepPoint(1, 1.0, 9.0, 10).all_touched()


def test_expected_touched_edges() -> None:
    assert expected_touched(3, 1, 1) == 1.0  # E = k = 1: 1·(1 - 0^3)
    assert expected_touched(2, 4, 1) == 1.75  # 4·(1 - (3/4)^2) = 4·0.4375
    for experts, top_k in ((4, 0), (0, 0), (-1, 1), (4, 5)):
        with pytest.raises(ValueError, match=rf"need 0 < k <= E, got E={experts}, k={top_k}"):
            expected_touched(2, experts, top_k)


def test_moe_points_reads_median_first_then_value() -> None:
    pts = moe_points(
        [
            ({"M": 1}, {"time_ms": {"median": 2.0, "value": 3.0}}),
            ({"M": 2}, {"time_ms": {"value": 3.0}}),
            ({"M": 4}, {"time_ms": {"median": 5}}),
        ]
    )
    assert [(p.m, p.time_ms, p.touched, p.experts) for p in pts] == [
        (1, 2.0, None, None),
        (2, 3.0, None, None),
        (4, 5.0, None, None),
    ]
    assert isinstance(pts[2].time_ms, float)


def test_moe_points_skips_pairs_without_an_integer_m_or_a_numeric_time() -> None:
    rows = [
        ({"M": 1}, {"time_ms": {"value": None}}),
        ({"M": 2}, {"time_ms": {"value": True}}),
        ({"M": 3}, {"time_ms": {"value": "1.5"}}),
        ({"M": 4}, {"time_ms": 1.5}),
        ({"M": 5}, {}),
        ({"M": True}, {"time_ms": {"value": 1.0}}),
        ({"M": "8"}, {"time_ms": {"value": 1.0}}),
        ({"M": 8.0}, {"time_ms": {"value": 1.0}}),
        ({}, {"time_ms": {"value": 1.0}}),
        ({"M": 16}, {"time_ms": {"value": 1.25}}),  # after the skipped ones: kept
    ]
    assert moe_points(rows) == [SweepPoint(16, 1.25)]


def test_moe_points_expert_counts() -> None:
    def point(case: dict[str, object], metrics: dict[str, object] | None = None) -> SweepPoint:
        (p,) = moe_points([({"M": 2, **case}, {"time_ms": {"value": 1.0}, **(metrics or {})})])
        return p

    # no `shared`: none; D(2) for E=4, k=1 is 4·(1 - (3/4)^2) = 1.75
    assert point({"E": 4, "k": 1}) == SweepPoint(2, 1.0, 1.75, 4)
    assert point({"E": 4, "k": 1, "shared": 2}) == SweepPoint(2, 1.0, 3.75, 6)
    # k = E = 8: every expert by the first token; D(2) = 8·(1 - 0^2) = 8
    assert point({"E": 8, "k": 8}) == SweepPoint(2, 1.0, 8.0, 8)
    # the measured routing wins over D(M)
    assert point({"E": 4, "k": 1, "shared": 1}, {"distinct_experts": {"value": 3}}) == SweepPoint(2, 1.0, 3.0, 5)
    # no usable counts: the point counts as touched (both None)
    for case in ({}, {"E": 4}, {"k": 1}, {"E": 4, "k": 0}, {"E": 4, "k": 5}, {"E": 4, "k": 1, "shared": "1"}):
        assert point(case) == SweepPoint(2, 1.0, None, None), case
