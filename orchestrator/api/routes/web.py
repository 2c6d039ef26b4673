"""``GET /``: the dashboard, one self-contained HTML page (no CDN: users' networks may be closed)."""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(include_in_schema=False)


@cache
def _page() -> str:
    return resources.files("orchestrator.web").joinpath("index.html").read_text(encoding="utf-8")


@router.get("/", response_class=HTMLResponse)
def dashboard() -> HTMLResponse:
    return HTMLResponse(_page())
