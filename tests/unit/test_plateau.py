"""plateau_start: the smallest M from which time per call stays within tol of the time at the largest M."""

from __future__ import annotations

import pytest

from orchestrator.analysis.plateau import plateau_start

# the issue-5 reference shape on H200 (kimi-k2 without the shared expert)
H200_REF = [
    (1, 0.30),
    (8, 1.77),
    (64, 7.8),
    (256, 10.3),
    (512, 10.4),
    (1024, 10.4),
    (2048, 10.5),
    (4096, 10.5),
]


def test_reference_sweep_plateaus_at_256() -> None:
    assert plateau_start(H200_REF) == 256
    assert plateau_start(list(reversed(H200_REF))) == 256  # order does not matter
    assert plateau_start(H200_REF, tol=0.01) == 512  # 10.4 is 0.95% off 10.5, 10.3 is 1.9% off
    assert plateau_start(H200_REF, tol=0.0) == 2048
    assert plateau_start(H200_REF, tol=0.30) == 64  # |7.8 - 10.5| = 2.7 <= 3.15


def test_edge_cases() -> None:
    assert plateau_start([]) is None
    assert plateau_start([(16, 3.0)]) == 16
    assert plateau_start([(1, 1.0), (2, 2.0), (4, 4.0)]) == 4  # never flat: only the last point


def test_non_monotone_outlier_moves_the_start() -> None:
    assert plateau_start([(1, 10.0), (2, 1.0), (4, 10.5), (8, 10.0)]) == 4  # M=2 dips out of the band
    assert plateau_start([(1, 10.0), (2, 11.5), (4, 10.0), (8, 10.0)]) == 4  # a spike above it
    assert plateau_start([(1, 1.0), (2, 9.5), (4, 10.5), (8, 10.0)]) == 2  # wiggles inside the band


def test_band_is_inclusive() -> None:
    assert plateau_start([(1, 9.0), (2, 10.0)]) == 1  # exactly 10% below
    assert plateau_start([(1, 8.99), (2, 10.0)]) == 2


@pytest.mark.parametrize(
    ("points", "tol", "match"),
    [
        ([(1, 1.0)], -0.1, "tol must be >= 0"),
        ([(1, 0.0), (2, 1.0)], 0.1, "time at M=1 must be positive"),
        ([(1, 1.0), (1, 1.1)], 0.1, "M=1 appears more than once"),
    ],
)
def test_rejects(points: list[tuple[int, float]], tol: float, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        plateau_start(points, tol)
