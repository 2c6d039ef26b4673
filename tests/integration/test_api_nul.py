"""Regression (found by the schemathesis run on PostgreSQL): a NUL byte in a query parameter is a 422 naming
the parameter, on both databases — PostgreSQL text cannot hold NUL and used to answer 500."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from orchestrator.settings import Settings
from orchestrator.store.repo import Store
from tests.integration.conftest import seed


@pytest.mark.parametrize("path", ["/api/v1/series?suite=moe-sweep&host=h%001", "/api/v1/runs?label=a%00b"])
def test_nul_in_query_is_422_not_500(store: Store, serve: Callable[[Settings, Store], str], path: str) -> None:
    seed(store)
    base = serve(Settings(db_url="sqlite://"), store)
    r = httpx.get(base + path, timeout=10)
    assert r.status_code == 422, r.text
    assert "NUL" in r.json()["detail"][0]["msg"]
    ok = httpx.get(base + "/api/v1/series?suite=moe-sweep&host=h1", timeout=10)
    assert ok.status_code == 200
