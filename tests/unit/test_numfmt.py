"""``orchestrator.numfmt.number``: every table's numeric cells — at least 3 significant figures, a non-zero value
never shown as 0 (a fixed 2 decimals printed TFLOP/s 0.00475 as ``0.00``)."""

from __future__ import annotations

import math

import pytest

from orchestrator.numfmt import number, percent


@pytest.mark.parametrize(
    ("x", "shown"),
    [
        (0.00475, "0.00475"),
        (0.00194, "0.00194"),
        (0.001, "0.00100"),
        (0.0099996, "0.01000"),
        (0.009, "0.00900"),
        (0.000494, "0.000494"),
        (0.0009999, "0.00100"),
        (1e-7, "1.00e-07"),
        (-1e-7, "-1.00e-07"),
        (12345.6, "12,346"),
        (-12345.6, "-12,346"),
        (-0.00475, "-0.00475"),
        (2.5, "2.50"),
        (123.456, "123"),
        (1e20, "1.00e+20"),
        (0.0, "0"),
        (-0.0, "0"),
        (0, "0"),
        (4096, "4096"),
        (float("nan"), "nan"),
        (float("inf"), "inf"),
        (float("-inf"), "-inf"),
        (None, "-"),
    ],
)
def test_number(x: float | None, shown: str) -> None:
    assert number(x) == shown


@pytest.mark.parametrize("x", [1e-300, 3e-9, 0.0012, 0.0049, 0.0051, 0.5, 9.96e-4, 1.0, 99.95, 12345.6, 6.02e23])
@pytest.mark.parametrize("sign", [1, -1])
def test_never_zero_and_three_significant_figures(x: float, sign: int) -> None:
    text = number(sign * x)
    value = float(text.replace(",", ""))
    assert value != 0 and math.copysign(1, value) == sign
    assert abs(value - sign * x) <= 0.005 * x  # within half a unit of the 3rd significant figure
    digits = text.lstrip("-").split("e")[0].replace(",", "").replace(".", "").lstrip("0")
    assert len(digits) >= 3, text


def test_ratio_sign_and_percent() -> None:
    assert number(1.0012, 3, min_decimals=3) == "1.001"
    assert number(0.0004, 3, min_decimals=3) == "0.000400"
    assert number(0.032, sign=True) == "+0.0320" and number(-3.2, sign=True) == "-3.20" and number(0, sign=True) == "0"
    assert percent(0.00001) == "0.00100%" and percent(0.0123) == "1.23%" and percent(None) == "-"
    assert percent(0.0004, sign=True) == "+0.0400%"
