"""Every API parameter that names a run takes the CLI's references (short id or its start, a prefix of the full
id, latest, latest~N), resolved by the server: a real uvicorn on SQLite and PostgreSQL, through httpx."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from pydantic import SecretStr

from orchestrator.settings import Settings
from orchestrator.store.compute import short_run_id
from orchestrator.store.repo import Store
from tests.integration.conftest import WRITE_TOKEN, seed


@pytest.fixture
def client(store: Store, serve: Callable[[Settings, Store], str]) -> tuple[httpx.Client, dict[str, str]]:
    ids = seed(store)  # hbm, base, head: created in that order, so head is latest and base latest~1
    url = serve(Settings(api_token=SecretStr(WRITE_TOKEN)), store)
    return httpx.Client(base_url=url, timeout=30), ids


def test_run_parameters_take_the_clis_references(client: tuple[httpx.Client, dict[str, str]]) -> None:
    c, ids = client
    base, head = ids["base"], ids["head"]
    with c:
        for ref in (short_run_id(head), short_run_id(head)[:5], "latest", "LATEST", head, head[:13]):
            r = c.get(f"/api/v1/runs/{ref}")
            assert r.status_code == 200, (ref, r.text)
            assert r.json()["id"] == head
        assert c.get("/api/v1/runs/latest~1").json()["id"] == base
        r = c.get(f"/api/v1/runs/{short_run_id(head)}/results", params={"limit": 1})
        assert r.status_code == 200 and r.json()["total"] == 8
        assert c.get("/api/v1/runs/latest/flags").status_code == 200
        by_short = c.get("/api/v1/compare", params={"base": short_run_id(base), "head": short_run_id(head)})
        by_id = c.get("/api/v1/compare", params={"base": base, "head": head})
        assert by_short.status_code == 200, by_short.text
        assert by_short.json() == by_id.json() and by_short.json()["geomean"] is not None
        assert c.get("/api/v1/compare", params={"base": "latest~1", "head": "latest"}).json() == by_id.json()
        s = c.get("/api/v1/series", params={"suite": "moe-sweep", "run": "latest~1"})
        assert s.status_code == 200 and {ln["run_id"] for ln in s.json()["lines"]} == {base}
        assert c.get("/api/v1/changes", params={"run": "latest"}).status_code == 200
        assert c.get("/api/v1/projections", params={"run": short_run_id(base)}).json()["total"] == 0
        v = c.get("/api/v1/views", params={"run": ["latest", short_run_id(base)]})
        assert v.status_code == 200, v.text
        assert c.get("/api/v1/resolve", params={"ref": short_run_id(base)[:6]}).json()["id"] == base


def test_unknown_and_malformed_run_references(client: tuple[httpx.Client, dict[str, str]]) -> None:
    c, ids = client
    with c:
        # unknown: 404 naming what did not match
        for path, params, says in (
            ("/api/v1/runs/ffffeeee", {}, "no run matches 'ffffeeee'"),
            ("/api/v1/runs/0190a8b2-0000-7000-8000-000000000000", {}, "no run '0190a8b2-0000-7000-8000-000000000000'"),
            ("/api/v1/runs/latest~9", {}, "'latest~9': fewer than 10 runs are stored"),
            ("/api/v1/compare", {"base": "ffffeeee", "head": "latest"}, "no run matches 'ffffeeee'"),
        ):
            r = c.get(path, params=params)
            assert r.status_code == 404, (path, params, r.text)
            assert says in r.json()["detail"]
        # malformed: 422 naming the parameter and the accepted forms, never pydantic's pattern text
        for path, params, loc in (
            ("/api/v1/runs/not-a-run", {}, ["path", "run_id"]),
            ("/api/v1/runs/f5", {}, ["path", "run_id"]),
            ("/api/v1/compare", {"base": "latest", "head": "x y"}, ["query", "head"]),
            ("/api/v1/series", {"suite": "moe-sweep", "run": "latest~"}, ["query", "run"]),
            ("/api/v1/resolve", {"ref": "%%"}, ["query", "ref"]),
        ):
            r = c.get(path, params=params)
            assert r.status_code == 422, (path, params, r.text)
            [err] = r.json()["detail"]  # FastAPI's validation shape, as the OpenAPI document declares for 422
            assert err["loc"] == loc and err["msg"].startswith("invalid run id"), err
            assert "short id as `orch runs list` prints it" in err["msg"] and "latest~N" in err["msg"]
            assert "should match pattern" not in r.text
        # ambiguous: every run of the seed was started this minute, so 4 digits of the full id match them all
        r = c.get(f"/api/v1/runs/{ids['head'][:4]}")
        assert r.status_code == 422 and "is ambiguous: it matches" in r.json()["detail"][0]["msg"]
