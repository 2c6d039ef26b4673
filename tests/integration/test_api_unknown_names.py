"""Regression (found by a tester): an unknown suite or metric is a 400 naming the stored ones, as /views already
was, not a 200 with no lines that reads like "no data yet"; on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from orchestrator.settings import Settings
from orchestrator.store.repo import Store
from tests.integration.conftest import seed


@pytest.mark.parametrize(
    ("query", "message", "hint"),
    [
        ("suite=moe-sweep&metric=nosuch", "no result of suite 'moe-sweep' has metric 'nosuch'", "time_ms"),
        ("suite=nosuch&metric=time_ms", "no run of suite 'nosuch' is stored", "hbm-bandwidth, moe-sweep"),
        ("suite=moe-sweep&metric=nosuch&group_by=run", "has metric 'nosuch'", "metrics stored: "),
    ],
)
def test_series_of_an_unknown_name_is_400(
    store: Store, serve: Callable[[Settings, Store], str], query: str, message: str, hint: str
) -> None:
    seed(store)
    base = serve(Settings(db_url="sqlite://"), store)
    r = httpx.get(f"{base}/api/v1/series?{query}", timeout=10)
    assert r.status_code == 400, r.text
    assert message in r.json()["detail"] and hint in r.json()["detail"]


def test_series_of_known_names_still_answer(store: Store, serve: Callable[[Settings, Store], str]) -> None:
    seed(store)
    base = serve(Settings(db_url="sqlite://"), store)
    ok = httpx.get(f"{base}/api/v1/series?suite=moe-sweep&metric=time_ms", timeout=10)
    assert ok.status_code == 200 and len(ok.json()["lines"]) == 2
    # a known suite and metric on a host with no run of it: an empty answer is the truth, not an error
    none = httpx.get(f"{base}/api/v1/series?suite=moe-sweep&metric=time_ms&host=h9", timeout=10)
    assert none.status_code == 200 and none.json()["lines"] == []
