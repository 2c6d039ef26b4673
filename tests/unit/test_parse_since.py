"""``--since`` beyond what a datetime holds (found by a tester: OverflowError, exit 70) is a usage error."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from orchestrator.cli.runs import parse_since
from orchestrator.errors import UsageError

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("99999999d", "reaches back before the year 1"),
        ("1e300w", "neither an age"),  # not an age as written (digits and a unit): the ISO parser refuses it
        ("9999999999999w", "reaches back before the year 1"),
        ("9999-12-31T23:59:59-01:00", "outside the years 1 to 9999 in UTC"),
        ("0001-01-01T00:00:00+05:00", "outside the years 1 to 9999 in UTC"),
    ],
)
def test_since_out_of_range_is_a_usage_error(text: str, expected: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_since(text, NOW)
    assert expected in e.value.message and "--since" in e.value.message


def test_since_in_range() -> None:
    assert parse_since("2d", NOW) == datetime(2026, 11, 28, 12, 0, tzinfo=timezone.utc)
    assert parse_since("2026-11-30T08:00+01:00", NOW) == datetime(2026, 11, 30, 7, 0, tzinfo=timezone.utc)
