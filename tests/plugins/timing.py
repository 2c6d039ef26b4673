"""Test deadlines from one setting, scaled for the machine.

Every wait in the tests that involves another process (sshd, an ``orch`` subprocess, the agent, PostgreSQL)
is ``scaled(base)`` with a generous ``base`` (tens of seconds): a deadline says "this hangs", never "this is
slow". ``ORCH_TEST_TIME_SCALE`` (a positive number, default 1) multiplies them all, for a machine slower or
busier than a loaded 2-core CI box (e.g. ``ORCH_TEST_TIME_SCALE=3`` under ``stress-ng --cpu 2`` plus other
work). The per-test limit of pytest-timeout (``timeout`` in pyproject.toml, or ``--timeout``) is scaled too.
Speed is measured by ``bench/``, never asserted by a test.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def _time_scale() -> float:
    raw = os.environ.get("ORCH_TEST_TIME_SCALE", "1")
    try:
        scale = float(raw)
    except ValueError:
        scale = -1.0
    if not scale > 0 or scale == float("inf"):
        raise SystemExit(f"ORCH_TEST_TIME_SCALE={raw!r}: set a positive number such as 1 (default) or 3")
    return scale


TIME_SCALE = _time_scale()


def scaled(seconds: float) -> float:
    """``seconds`` (a deadline for this machine at load ~2 per core) times ``ORCH_TEST_TIME_SCALE``."""
    return seconds * TIME_SCALE


def wait_for(probe: Callable[[], T], *, timeout_s: float, what: str, interval_s: float = 0.2) -> T:
    """Call ``probe`` until it returns something truthy and return that; ``AssertionError`` naming ``what``
    after ``scaled(timeout_s)`` seconds."""
    deadline = time.monotonic() + scaled(timeout_s)
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {scaled(timeout_s):g} s (ORCH_TEST_TIME_SCALE={TIME_SCALE:g})")
        time.sleep(interval_s)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Scale pytest-timeout's per-test limit before that plugin reads it."""
    if TIME_SCALE == 1:
        return
    base = config.getoption("timeout", None) or config.getini("timeout")
    if base:
        config.option.timeout = float(base) * TIME_SCALE
