"""What a test does when a service of the test bed (sshd, PostgreSQL, docker-compose ...) cannot start.

It FAILS, naming the service, why and how to fix it: a green run must never mean "half the suite was
skipped" (``scripts/test.sh``, the README's test command, and CI alike). A developer's partial run may opt in
to skipping, explicitly and per service::

    ORCH_TEST_SKIP_SERVICES=postgres pytest tests/unit      # or a comma list, or "all"

and the skip then says why (pytest's ``-ra`` summary lists each reason). Under ``CI`` the opt-in is ignored.
"""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

SKIP_ENV = "ORCH_TEST_SKIP_SERVICES"


def skip_allowed(service: str) -> bool:
    """Whether ``ORCH_TEST_SKIP_SERVICES`` names ``service`` (or ``all``) and ``CI`` is not set."""
    if os.environ.get("CI"):
        return False
    names = {n.strip().lower() for n in os.environ.get(SKIP_ENV, "").split(",") if n.strip()}
    return service in names or "all" in names


def service_unavailable(service: str, reason: str, fix: str) -> NoReturn:
    """Fail the test (default) or, when opted in, skip it — either way naming ``service``, ``reason`` and ``fix``."""
    if skip_allowed(service):
        pytest.skip(f"{service} not available ({reason}); skipped because {SKIP_ENV} names it")
    pytest.fail(
        f"{service} is required by this test but could not start: {reason}\n"
        f"fix: {fix}\n"
        f"(to skip the tests that need it in a partial run, set {SKIP_ENV}={service}; CI never skips)",
        pytrace=False,
    )
