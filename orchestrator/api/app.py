"""The results API: ``create_app(settings)`` builds the FastAPI app; ``orch serve`` runs it under uvicorn.

Errors are JSON ``{"detail": ...}``: a NotFoundError is 404, a UsageError 400, request validation and an
IncomparableError 422, an unreachable or unmigrated database 503. Nothing here touches the database until a
request arrives. ``/docs`` and ``/redoc`` load their scripts from this server (``routes/docs.py``), not a CDN.
"""

from __future__ import annotations

import gc
import json
import logging
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse

from orchestrator.api.deps import require_read
from orchestrator.api.routes import (
    changes,
    compare,
    docs,
    health,
    hosts,
    logs,
    projections,
    results,
    runs,
    series,
    views,
    web,
)
from orchestrator.api.schemas import Detail
from orchestrator.errors import IncomparableError, NotFoundError, OrchError, StoreError, UsageError
from orchestrator.settings import Settings
from orchestrator.store.repo import Store

API_PREFIX = "/api/v1"
STORE_UNAVAILABLE = "the results database is unavailable; the server log says why"
_log = logging.getLogger("orch.api")
_ERRORS: dict[int | str, dict[str, object]] = {
    400: {"model": Detail},
    401: {"model": Detail},
    403: {"model": Detail},
    404: {"model": Detail},
    503: {"model": Detail},
}


def create_app(settings: Settings, store: Store | None = None) -> FastAPI:
    """The app over ``store`` (default: a Store on ``settings.db_url``, disposed at shutdown)."""
    own = store is None
    the_store = store if store is not None else Store.from_url(settings.db_url)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # What exists at startup (modules, the app, the engine) lives as long as the process: freezing it keeps
        # the cyclic GC from rescanning it during requests that allocate 10,000s of objects. A full collection
        # cost /series 35-40 ms and /compare ~50 ms per request on 1,000,000 results (bench/api.py).
        gc.freeze()
        yield
        if own:
            the_store.close()

    app = FastAPI(
        title="orch results API",
        version="1",
        description="Benchmark runs, results, plot series and run comparisons stored by orch.",
        lifespan=lifespan,
        docs_url=None,  # served by routes/docs.py with local assets
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.store = the_store
    origins = settings.cors_origin_list()
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type"],
        )
    app.add_exception_handler(OrchError, _orch_error)
    app.add_exception_handler(RequestValidationError, _validation_error)

    @app.middleware("http")
    async def reject_nul(request: Request, call_next: Any) -> Any:
        # PostgreSQL text cannot hold NUL; no name, label or id orch stores contains one: a 422, never a 500.
        for key, value in request.query_params.multi_items():
            if "\x00" in key or "\x00" in value:
                shown = key.replace("\x00", "?")
                return JSONResponse(  # FastAPI's own validation-error shape, as the OpenAPI schema says
                    status_code=422,
                    content={"detail": [{"loc": ["query", shown], "type": "value_error",
                                         "msg": f"query parameter {shown!r} contains a NUL character"}]},
                )  # fmt: skip
        return await call_next(request)

    api = APIRouter(prefix=API_PREFIX, dependencies=[Depends(require_read)], responses=_ERRORS)
    for module in (hosts, runs, logs, results, series, compare, changes, projections, views):
        api.include_router(module.router)
    app.include_router(api)
    app.include_router(health.router, responses=_ERRORS)
    app.include_router(web.router)
    docs.install(app)
    return app


async def _orch_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, OrchError)
    if isinstance(exc, NotFoundError):
        code = 404
    elif isinstance(exc, StoreError):
        # The driver's text names the database host, port and user: the server log gets it, the caller not.
        _log.warning("%s (%s)", exc.message, exc.hint)  # the message names it: "database error: ..."
        return JSONResponse({"detail": STORE_UNAVAILABLE}, status_code=503)
    elif isinstance(exc, IncomparableError):
        code = 422
    elif isinstance(exc, UsageError):
        code = 400
    else:
        code = 500
    detail = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
    return JSONResponse({"detail": detail}, status_code=code)


class _AsciiJSONResponse(JSONResponse):
    """JSON with every non-ASCII character escaped (``\\ud800``): a validation error echoes the caller's input,
    and a lone surrogate in it (valid in JSON text, ``"\\ud800"``) cannot be encoded as UTF-8."""

    def render(self, content: Any) -> bytes:
        return json.dumps(_finite(content), ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode()


def _finite(value: Any) -> Any:
    """``value`` with NaN/Infinity (which Python's JSON parser accepts in a body) as the strings JSON can hold."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    # FastAPI's own 422 shape; its default handler answered 500 when the rejected input held a lone surrogate.
    assert isinstance(exc, RequestValidationError)
    return _AsciiJSONResponse({"detail": jsonable_encoder(exc.errors())}, status_code=422)
