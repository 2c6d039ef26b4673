"""Counts in English: ``counted(1, "result")`` is "1 result", ``counted(2, "result")`` "2 results" — pure."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` followed by ``noun`` in the number it needs: singular for exactly 1, else ``plural`` (default
    ``noun + "s"``), as in "0 results", "1 result", "2 hosts", "1 case", "3 cases"."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"
