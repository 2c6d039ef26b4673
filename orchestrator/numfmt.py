"""Numbers as every table shows them — pure.

One rule for every numeric cell the CLI prints (``runs show``, ``runs compare``, ``runs check``, ``calibrate``,
``fleet``, ``doctor``, ``project``): at least ``digits`` significant figures, and a value that is not zero never
reads as zero. ``number(0.00475)`` is ``0.00475`` (a fixed count of decimals would print ``0.00``),
``number(12345.6)`` is ``12,346``, ``number(1e-7)`` is ``1.00e-07``, ``number(0.0)`` is ``0``,
``number(float("nan"))`` is ``nan``.
"""

from __future__ import annotations

import math
from typing import Any

# Fixed notation between these magnitudes, scientific outside: below 1e-3 a fixed figure is mostly leading
# zeros; from 1e15 a float's digits past the 16th are noise.
_FIXED_FROM = 1e-3
_FIXED_BELOW = 1e15


def number(x: Any, digits: int = 3, *, min_decimals: int = 0, sign: bool = False, missing: str = "-") -> str:
    """``x`` for a table cell.

    ``x``: a float, an int (printed whole, as written: an M of 4096 stays ``4096``) or ``None``
    (``missing``); anything else is ``str(x)``. ``digits``: the least number of significant figures
    shown (3 by default); ``min_decimals`` asks for more decimals (3 for a ratio: ``1.001``).
    ``sign``: a leading ``+`` on positive values (a change). ``nan``/``inf`` print as such; exactly 0
    (or -0.0) prints ``0``.
    """
    if x is None:
        return missing
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    plus = "+" if sign and x != 0 else ""
    if isinstance(x, int):
        return f"{x:{plus}d}"
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return ("-" if x < 0 else plus) + "inf"
    if x == 0:
        return "0"
    mag = abs(x)
    if mag < _FIXED_FROM or mag >= _FIXED_BELOW:
        return f"{x:{plus}#.{digits}g}"
    decimals = max(min_decimals, digits - 1 - math.floor(math.log10(mag)))  # >= digits - 1 + 3 below 1
    text = f"{x:{plus},.{decimals}f}"
    return text


def percent(fraction: float | None, digits: int = 3, *, sign: bool = False) -> str:
    """A fraction (0.0123) as a percentage cell (``1.23%``) under :func:`number`'s rule; ``None`` is ``-``."""
    if fraction is None:
        return "-"
    return number(fraction * 100, digits, sign=sign) + "%"
