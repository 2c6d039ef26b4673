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
