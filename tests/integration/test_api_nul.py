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


# Regression (found by a tester): a lone surrogate is valid JSON text ("\ud800") that pydantic rejects, and
# FastAPI's default handler then failed to encode the echoed input as UTF-8: 500 instead of 422.
@pytest.mark.parametrize(
    ("body", "loc"),
    [
        (b'{"label":"\\ud800"}', ["body", "label"]),
        (b'{"label":"ok\\udfff"}', ["body", "label"]),
        (b'{"\\ud800": "x"}', ["body"]),
        (b'["\\udc80"]', ["body"]),
        (b'{"label": NaN}', ["body", "label"]),
        (b'{"label": -Infinity}', ["body", "label"]),
    ],
)
def test_unencodable_body_is_422_not_500(
    store: Store, serve: Callable[[Settings, Store], str], body: bytes, loc: list[str]
) -> None:
    ids = seed(store)
    base = serve(Settings(db_url="sqlite://", api_token="tok123"), store)
    headers = {"Authorization": "Bearer tok123", "content-type": "application/json"}
    r = httpx.post(f"{base}/api/v1/runs/{ids['head']}/label", content=body, headers=headers, timeout=10)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == loc
    assert r.text.isascii()
    assert store.get_run(ids["head"]).label == "head"  # nothing was written


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/runs?label=%ED%A0%80",  # the UTF-8 bytes of a surrogate: decoded with replacement, no 500
        "/api/v1/series?suite=moe-sweep&host=%ED%A0%80&metric=%ff",
        "/api/v1/runs/%ED%A0%80",
        "/api/v1/compare?base=%ED%A0%80&head=%ff",
    ],
)
def test_undecodable_query_and_path_are_not_500(
    store: Store, serve: Callable[[Settings, Store], str], path: str
) -> None:
    seed(store)
    base = serve(Settings(db_url="sqlite://"), store)
    r = httpx.get(base + path, timeout=10)
    assert 200 <= r.status_code < 500, r.text


# Python's int() reads other scripts' digits ('١٢' is 12); the API's integer query parameters must not.
@pytest.mark.parametrize(
    ("path", "param"),
    [
        ("/api/v1/runs?limit=%D9%A1%D9%A2", "limit"),  # Arabic-Indic 12
        ("/api/v1/runs?offset=%EF%BC%91", "offset"),  # fullwidth 1
        ("/api/v1/runs?limit=99999999999999999999999", "limit"),
        ("/api/v1/changes?suite=moe-sweep&limit=%E0%A5%A8", "limit"),  # Devanagari 2
    ],
)
def test_integer_queries_take_ascii_digits_in_range(
    store: Store, serve: Callable[[Settings, Store], str], path: str, param: str
) -> None:
    seed(store)
    base = serve(Settings(db_url="sqlite://"), store)
    r = httpx.get(base + path, timeout=10)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["query", param], r.json()
    assert httpx.get(base + "/api/v1/runs?limit=12&offset=1", timeout=10).status_code == 200
