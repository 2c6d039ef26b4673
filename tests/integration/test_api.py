"""The results API through a real uvicorn server on a free port, with httpx; on SQLite and PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import pytest
from pydantic import SecretStr

from orchestrator.api.schemas import ComparisonOut, SeriesOut
from orchestrator.api.security import check_listen_policy, token_problem
from orchestrator.errors import ConfigError
from orchestrator.settings import Settings
from orchestrator.store.repo import Store
from tests.integration.conftest import WRITE_TOKEN, hello, result_event, seed

READ_TOKEN = "r" * 8 + "-0123456789abcdef"


@dataclass
class Api:
    url: str
    store: Store
    runs: dict[str, str]

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@pytest.fixture
def api(store: Store, serve: Callable[[Settings, Store], str]) -> Api:
    ids = seed(store)
    settings = Settings(api_token=SecretStr(WRITE_TOKEN), cors_origins="https://dash.example")
    return Api(serve(settings, store), store, ids)


def test_health_hosts_and_dashboard(api: Api) -> None:
    with api.client() as c:
        health = c.get("/healthz").json()
        assert health["status"] == "ok" and health["database"] == api.store.dialect and health["schema_revision"]
        assert [h["name"] for h in c.get("/api/v1/hosts").json()] == ["h1", "h2"]
        page = c.get("/")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert '<script src="/assets/plotly.min.js"></script>' in page.text and "https://" not in page.text
        assert 'const API = "/api/v1";' in c.get("/assets/dash.js").text  # test_dashboard.py drives it
        assert c.get("/openapi.json").status_code == 200


def test_runs_list_filters_and_pagination(api: Api) -> None:
    with api.client() as c:
        body = c.get("/api/v1/runs").json()
        assert body["total"] == 3 and [r["label"] for r in body["items"]] == ["head", "base", "hbm"]
        body = c.get("/api/v1/runs", params={"suite": "moe-sweep", "limit": 1, "offset": 1}).json()
        assert body["total"] == 2 and [r["label"] for r in body["items"]] == ["base"]
        assert c.get("/api/v1/runs", params={"host": "h2"}).json()["total"] == 2
        assert c.get("/api/v1/runs", params={"label": "hbm", "status": "completed"}).json()["total"] == 1
        assert c.get("/api/v1/runs", params={"since": "2999-01-01T00:00:00"}).json()["total"] == 0
        assert c.get("/api/v1/runs", params={"until": "2999-01-01T00:00:00+02:00"}).json()["total"] == 3


def test_runs_list_of_an_unknown_suite_is_a_400_but_a_known_one_without_runs_is_empty(api: Api) -> None:
    with api.client() as c:
        typo = c.get("/api/v1/runs", params={"suite": "moe-swep"})
        assert typo.status_code == 400, typo.text
        detail = typo.json()["detail"]
        assert "'moe-swep' is neither a known suite nor one with stored runs" in str(detail)
        assert "moe-sweep" in str(detail) and "hbm-bandwidth" in str(detail)
        assert c.get("/api/v1/runs", params={"suite": "decode"}).json()["total"] == 0  # built-in, no runs yet
        assert c.get("/api/v1/runs", params={"suite": "moe-swep", "host": "h1"}).status_code == 400


def test_run_detail_results_and_roof(api: Api) -> None:
    with api.client() as c:
        run = c.get(f"/api/v1/runs/{api.runs['head']}").json()
        assert [h["host"] for h in run["host_runs"]] == ["h1", "h2"] and run["results"] == 8
        assert run["host_runs"][0]["measured_roof_gbps"] == 4000.0 and run["host_runs"][1]["measured_roof_gbps"] is None
        res = c.get(f"/api/v1/runs/{api.runs['head']}/results", params={"host": "h1"}).json()
        assert res["total"] == 4 and res["items"][0]["pct_of_measured_roof"] == pytest.approx(75.0)
        assert res["items"][0]["metrics"]["time_ms"]["unit"] == "ms"
        assert res["items"][0]["metrics"]["time_ms"]["samples"] is None
        res = c.get(f"/api/v1/runs/{api.runs['head']}/results", params={"samples": True, "limit": 1}).json()
        assert len(res["items"]) == 1 and len(res["items"][0]["metrics"]["time_ms"]["samples"]) == 3


def test_series_and_compare(api: Api) -> None:
    with api.client() as c:
        s = c.get("/api/v1/series", params={"suite": "moe-sweep", "metric": "time_ms", "x": "M"}).json()
        assert [(ln["host"], ln["run_id"]) for ln in s["lines"]] == [
            ("h1", api.runs["head"]),
            ("h2", api.runs["head"]),
        ]
        assert [(p["x"], p["y"]) for p in s["lines"][0]["points"]] == [(2, 1), (4, 2), (8, 3), (16, 4)]
        s = c.get("/api/v1/series", params={"suite": "moe-sweep", "group_by": "run", "host": "h1"}).json()
        assert [ln["run_id"] for ln in s["lines"]] == [api.runs["head"], api.runs["base"]]
        cmp = c.get("/api/v1/compare", params={"base": api.runs["base"], "head": api.runs["head"]}).json()
        assert cmp["metric"] == "time_ms" and cmp["geomean"] == pytest.approx(0.5) and len(cmp["cases"]) == 8
        assert (cmp["threshold"], cmp["noisy"]) == (0.05, 0)
        first = cmp["cases"][0]  # M=2 on h1: base 2.0 (1.9-2.1), head 1.0 (0.95-1.05)
        assert (first["base_p10"], first["base_p90"], first["head_p10"], first["head_p90"]) == (1.9, 2.1, 0.95, 1.05)
        assert {(x["noisy"], x["verdict"]) for x in cmp["cases"]} == {(False, "improvement")}
        g = c.get("/api/v1/compare", params={"base": api.runs["base"], "head": api.runs["head"], "metric": "gbps"})
        assert g.json()["geomean"] == pytest.approx(1.0)


def test_series_and_compare_bytes_are_their_schemas(api: Api) -> None:
    """/series and /compare serialize the store's records directly (no schema validation on the hot path):
    the bytes must be exactly those of the documented response schemas."""
    with api.client() as c:
        series = c.get("/api/v1/series", params={"suite": "moe-sweep", "metric": "time_ms", "x": "M"})
        cmp = c.get("/api/v1/compare", params={"base": api.runs["base"], "head": api.runs["head"]})
    want = SeriesOut.model_validate(api.store.series(suite="moe-sweep", metric="time_ms", x="M"))
    assert series.content == want.model_dump_json().encode()
    assert (
        cmp.content
        == ComparisonOut.model_validate(api.store.compare(api.runs["base"], api.runs["head"]))
        .model_dump_json()
        .encode()
    )


@pytest.mark.parametrize(
    ("path", "params", "code"),
    [
        ("/api/v1/runs/not-a-uuid", {}, 422),
        ("/api/v1/runs/0190a8b2-0000-7000-8000-000000000000", {}, 404),
        ("/api/v1/runs/0190a8b2-0000-7000-8000-000000000000/results", {}, 404),
        ("/api/v1/runs", {"limit": 0}, 422),
        ("/api/v1/runs", {"limit": 100000}, 422),
        ("/api/v1/runs", {"since": "yesterday"}, 422),
        ("/api/v1/runs", {"since": "0001-01-01T00:00:00+05:00"}, 422),
        ("/api/v1/runs", {"status": "exploded"}, 422),
        ("/api/v1/runs", {"suite": "a\x00b"}, 422),
        ("/api/v1/series", {}, 422),
        ("/api/v1/series", {"suite": "moe-sweep", "metric": "x'); drop table runs;--"}, 422),
        ("/api/v1/compare", {"base": "x", "head": "y"}, 422),
        ("/api/v1/compare", {"base": "0190a8b2-0000-7000-8000-000000000000",
                             "head": "0190a8b2-0000-7000-8000-000000000001"}, 404),
    ],
)  # fmt: skip
def test_bad_input_is_4xx_with_detail(api: Api, path: str, params: dict[str, object], code: int) -> None:
    with api.client() as c:
        r = c.get(path, params=params)
        assert r.status_code == code, r.text
        assert "detail" in r.json()


def test_compare_unknown_metric_is_404(api: Api) -> None:
    with api.client() as c:
        r = c.get("/api/v1/compare", params={"base": api.runs["base"], "head": api.runs["head"], "metric": "nope"})
        assert r.status_code == 404 and "nope" in r.json()["detail"]


def test_writes_need_the_token(api: Api) -> None:
    rid = api.runs["base"]
    with api.client() as anon, api.client("wrong-token-wrong-token") as wrong, api.client(WRITE_TOKEN) as ok:
        assert anon.delete(f"/api/v1/runs/{rid}").status_code == 401
        assert wrong.delete(f"/api/v1/runs/{rid}").status_code == 401
        assert wrong.post(f"/api/v1/runs/{rid}/label", json={"label": "x"}).status_code == 401
        r = ok.post(f"/api/v1/runs/{rid}/label", json={"label": "renamed"})
        assert r.status_code == 200 and r.json()["label"] == "renamed"
        assert ok.post(f"/api/v1/runs/{rid}/label", json={"label": 5}).status_code == 422
        assert ok.delete(f"/api/v1/runs/{rid}").status_code == 204
        assert ok.delete(f"/api/v1/runs/{rid}").status_code == 404
        assert anon.get(f"/api/v1/runs/{rid}").status_code == 404


def test_writes_disabled_without_token_and_read_token(store: Store, serve: Callable[[Settings, Store], str]) -> None:
    seed(store)
    url = serve(Settings(), store)
    with httpx.Client(base_url=url) as c:
        assert c.delete("/api/v1/runs/0190a8b2-0000-7000-8000-000000000000").status_code == 403
    url = serve(Settings(api_token=SecretStr(WRITE_TOKEN), api_read_token=SecretStr(READ_TOKEN)), store)
    with httpx.Client(base_url=url) as c:
        assert c.get("/api/v1/runs").status_code == 401
        assert c.get("/api/v1/runs", headers={"Authorization": f"Bearer {READ_TOKEN}"}).status_code == 200
        assert c.get("/api/v1/runs", headers={"Authorization": f"Bearer {WRITE_TOKEN}"}).status_code == 200
        assert c.get("/healthz").status_code == 200


def test_cors(api: Api) -> None:
    with api.client() as c:
        r = c.options(
            "/api/v1/runs",
            headers={"Origin": "https://dash.example", "Access-Control-Request-Method": "GET"},
        )
        assert r.headers.get("access-control-allow-origin") == "https://dash.example"
        r = c.get("/api/v1/runs", headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in r.headers


@pytest.mark.parametrize("token", [None, "", "changeme", "token", "short-token", "x" * 32])
def test_serve_refuses_placeholder_tokens_beyond_loopback(token: str | None) -> None:
    secret = SecretStr(token) if token is not None else None
    check_listen_policy("127.0.0.1", secret)
    check_listen_policy("::1", secret)
    check_listen_policy("localhost", secret)
    with pytest.raises(ConfigError):
        check_listen_policy("0.0.0.0", secret)
    assert token_problem(SecretStr("8f3c2a9b1d7e4f60a5b3c9d2e1f0a7b6")) is None


def test_compare_runs_of_different_suites_is_422(api: Api) -> None:
    with api.client() as c:
        r = c.get("/api/v1/compare", params={"base": api.runs["hbm"], "head": api.runs["head"]})
    assert r.status_code == 422
    assert r.json()["detail"] == (
        f"run {api.runs['hbm']} is of suite 'hbm-bandwidth' and run {api.runs['head']} of suite 'moe-sweep': "
        "runs of different suites have no case in common "
        "(compare two runs of one suite; see them with `orch runs list --suite hbm-bandwidth`)"
    )


def test_compare_of_a_run_with_itself_is_422_as_in_the_cli(api: Api) -> None:
    """``runs compare X X`` and ``runs check X --base X`` exit 2; the API agrees (tests/e2e/test_gate_bites.py)."""
    rid = api.runs["head"]
    with api.client() as c:
        r = c.get("/api/v1/compare", params={"base": rid, "head": rid[-8:]})
    assert r.status_code == 422
    assert r.json()["detail"] == (
        f"base and head are the same run ({rid[-8:]}): a run compared with itself shows nothing (pass an earlier run "
        "as base and the candidate as head: `orch runs compare latest~1 latest`)"
    )


def test_compare_runs_sharing_no_case_is_422(api: Api) -> None:
    rid = api.store.create_run(suite="moe-sweep", params={}, preset=None, label="other", hosts=["h1"],
                               started_by="t@box", started_on="box")  # fmt: skip
    api.store.start_host_run(rid, "h1", facts={}, agent_version="v", build_sha=None)
    api.store.ingest(rid, "h1", [hello(0), *(result_event(i, 2**i, 1.0, E=1) for i in range(1, 3))])
    with api.client() as c:
        r = c.get("/api/v1/compare", params={"base": api.runs["base"], "head": rid})
    assert r.status_code == 422
    assert r.json()["detail"].startswith(
        f"runs {api.runs['base']} and {rid} (suite 'moe-sweep') share no case with metric 'time_ms': "
        "base has 4 cases, head has 2"
    )


def test_docs_pages_load_their_assets_from_this_server(api: Api) -> None:
    """/docs and /redoc work on a closed network: every URL they reference is same-origin and answers 200."""
    with api.client() as c:
        for page in ("/docs", "/redoc"):
            html = c.get(page)
            assert html.status_code == 200 and "text/html" in html.headers["content-type"]
            urls = re.findall(r'(?:src|href|spec-url)="([^"]*)"|url: \'([^\']*)\'', html.text)
            refs = [a or b for a, b in urls]
            assert len(refs) >= (4 if page == "/docs" else 3), refs
            assert "http:" not in html.text and "https:" not in html.text and "cdn" not in html.text
            for ref in refs:
                assert ref.startswith("/") and not ref.startswith("//"), ref
                assert c.get(ref).status_code == 200, ref
        assert c.get("/docs/oauth2-redirect").status_code == 200
