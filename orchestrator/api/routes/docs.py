"""``/docs`` (Swagger UI) and ``/redoc`` (ReDoc) with their scripts served by this server, not by a CDN.

orch's users often work on closed networks where FastAPI's default pages (assets from cdn.jsdelivr.net) stay
blank. The assets come from the ``fastapi-offline`` package (MIT; swagger-ui-dist 5 and redoc standalone,
refreshed with its releases); only its ``static/`` files are used, mounted at ``/docs-assets``.
``swagger-ui-bundle`` was not used: its newest release (1.1.0) ships Swagger UI 4.15, which cannot render the
OpenAPI 3.1 document FastAPI produces.
"""

from __future__ import annotations

from importlib import resources

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

ASSETS_URL = "/docs-assets"


def install(app: FastAPI, *, docs_url: str = "/docs", redoc_url: str = "/redoc") -> None:
    """Mount the assets and add the two pages (and Swagger UI's OAuth2 redirect) to ``app``, outside the schema.

    URLs are prefixed with the request's ``root_path``, so the pages work behind a proxy that mounts orch
    under a path."""
    static = resources.files("fastapi_offline") / "static"
    app.mount(ASSETS_URL, StaticFiles(directory=str(static)), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"
    oauth2_url = app.swagger_ui_oauth2_redirect_url or f"{docs_url}/oauth2-redirect"

    @app.get(docs_url, include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=f"{root}{oauth2_url}",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
        )

    @app.get(oauth2_url, include_in_schema=False)
    def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(redoc_url, include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )
