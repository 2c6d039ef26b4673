"""The dashboard: one page (``web/index.html`` with ``web/dash.js``) served at every dashboard URL — ``/``,
``/runs/{id}``, ``/compare?base=&head=``, ``/hosts/{name}``, ``/series?suite=&metric=&x=`` — whose script reads
the URL and draws that view; and its assets, all from this server (no CDN: users' networks may be closed).
Plotly.js is the copy the ``plotly`` Python package ships (``plotly/package_data/plotly.min.js``)."""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter, HTTPException, Response
from fastapi.responses import HTMLResponse

router = APIRouter(include_in_schema=False)
_ASSETS = {"dash.js": "text/javascript"}
_CACHE = "public, max-age=3600"


@cache
def _page() -> str:
    return resources.files("orchestrator.web").joinpath("index.html").read_text(encoding="utf-8")


@cache
def _asset(name: str) -> bytes:
    return resources.files("orchestrator.web").joinpath(name).read_bytes()


@cache
def _plotly() -> bytes:
    return resources.files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()


def _dashboard() -> HTMLResponse:
    return HTMLResponse(_page())


for _path in ("/", "/runs/{ref}", "/compare", "/hosts/{name}", "/series"):
    router.add_api_route(_path, _dashboard, methods=["GET"], response_class=HTMLResponse)


@router.get("/assets/plotly.min.js")
def plotly_js() -> Response:
    return Response(_plotly(), media_type="text/javascript", headers={"Cache-Control": _CACHE})


@router.get("/assets/{name}")
def asset(name: str) -> Response:
    if name not in _ASSETS:
        raise HTTPException(404, f"no dashboard asset {name!r}")
    return Response(_asset(name), media_type=_ASSETS[name], headers={"Cache-Control": "no-cache"})
