"""suites/regexcheck.py: the repeat-of-a-repeat shape, found through groups, branches and lookarounds; patterns
that only look alike (something else in the group, a bounded or possessive inner repeat) pass."""

from __future__ import annotations

import re

import pytest

from orchestrator.suites.regexcheck import nested_quantifier


@pytest.mark.parametrize(
    ("pattern", "nested"),
    [(r"(?P<v>(a+)+)b", True), (r"(?:\d*)*", True), (r"((?:x*))+", True), (r"(?P<v>(\d+)+)b", True),
     (r"x|(a+)*", True), (r"(?=(a+)+)", True), (r"(?>(a+)+)", True), (r"(?P<v>(a+?)+?)", True),
     (r"(ab+)+", False), (r"(a{1,3})+", False), (r"(a++)+", False), (r"(?P<v>[\d.]+) ms", False),
     (r"time_ms: (?P<time_ms>[\d.e+-]+) gbps: (?P<gbps>[\d.e+-]+)", False), (r"(a+){2}", False)],
)  # fmt: skip
def test_nested_quantifier(pattern: str, nested: bool) -> None:
    assert nested_quantifier(pattern, re.MULTILINE) is nested
