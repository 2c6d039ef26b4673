"""Dependencies of the routes: the store, the bearer-token guards, the shared validated parameter types."""

from __future__ import annotations

import hmac
import logging
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Depends, HTTPException, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, SecretStr, TypeAdapter

from orchestrator.errors import SuiteError, UsageError
from orchestrator.settings import Settings
from orchestrator.store.compute import RUN_REF_FORMS
from orchestrator.store.repo import Store

if TYPE_CHECKING:
    from orchestrator.suites.registry import Registry

_log = logging.getLogger("orch.api")

RUN_REF_HELP = f"a run: {RUN_REF_FORMS} (as the CLI takes it)"
RUN_ID_PATTERN = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,63}$"
TEXT_PATTERN = r"^[^\x00-\x1f\x7f]*$"

_bearer = HTTPBearer(
    auto_error=False, description="ORCH_API_TOKEN for writes; ORCH_API_READ_TOKEN for reads if set"
)


def get_store(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def _matches(given: str, expected: SecretStr | None) -> bool:
    secret = expected.get_secret_value() if expected is not None else ""
    return bool(secret) and hmac.compare_digest(given.encode(), secret.encode())


def require_read(
    settings: Annotated[Settings, Depends(get_settings)],
    cred: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Reads are open unless ORCH_API_READ_TOKEN is set; then the read or the write token is needed."""
    if settings.api_read_token is None or not settings.api_read_token.get_secret_value():
        return
    token = cred.credentials if cred else ""
    if not (_matches(token, settings.api_read_token) or _matches(token, settings.api_token)):
        raise HTTPException(401, "a valid bearer token is required to read (ORCH_API_READ_TOKEN)",
                            headers={"WWW-Authenticate": "Bearer"})  # fmt: skip


def require_write(
    settings: Annotated[Settings, Depends(get_settings)],
    cred: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Writes need ``Authorization: Bearer $ORCH_API_TOKEN`` (constant-time compare); none if it is unset."""
    if settings.api_token is None or not settings.api_token.get_secret_value():
        raise HTTPException(403, "writes are disabled: the server has no ORCH_API_TOKEN")
    if cred is None or not _matches(cred.credentials, settings.api_token):
        raise HTTPException(401, "a valid bearer token is required to write (ORCH_API_TOKEN)",
                            headers={"WWW-Authenticate": "Bearer"})  # fmt: skip


def as_utc(value: datetime | None) -> datetime | None:
    """Naive query datetimes are UTC; aware ones are converted. Out-of-range conversions are a 422."""
    if value is None:
        return None
    try:
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
    except (OverflowError, ValueError) as exc:
        raise HTTPException(422, f"datetime out of range: {value.isoformat()}") from exc


def json_response(model: BaseModel) -> Response:
    """Serialize a response schema once. Routes that return big pages hand FastAPI a ready Response, which it
    does not validate a second time (the route's ``response_model`` still documents the shape)."""
    return Response(model.model_dump_json(), media_type="application/json")


def record_response(record: Any) -> Response:
    """Serialize a store record (a dataclass whose fields are those of the route's response schema) without
    validating it into the schema first: /series and /compare return 10,000s of points or cases, and building
    the pydantic models cost 10-50 ms per request (tests/integration/test_api.py checks both give the same bytes)."""
    adapter = _ADAPTERS.get(type(record))
    if adapter is None:
        adapter = _ADAPTERS[type(record)] = TypeAdapter(type(record))
    return Response(adapter.dump_json(record), media_type="application/json")


_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}  # built on first use: one per record class


StoreDep = Annotated[Store, Depends(get_store)]


def resolve_run_ref(store: Store, ref: str, param: str, *, where: str = "query") -> str:
    """The full id of the run the request parameter ``param`` (in ``where``: query or path) names, as
    ``Store.resolve_run_id`` reads it (the CLI's forms). An unknown run stays a NotFoundError (404); a malformed
    or ambiguous reference is a 422 in FastAPI's validation shape (``detail[0].loc`` the parameter) whose ``msg``
    names the accepted forms (or the matching runs)."""
    try:
        return store.resolve_run_id(ref)
    except UsageError as exc:
        msg = f"{exc.message} ({exc.hint})" if exc.hint else exc.message
        raise RequestValidationError([{"type": "run_ref", "loc": (where, param), "msg": msg, "input": ref}]) from exc


def _path_run(store: StoreDep, run_id: Annotated[str, Path(max_length=200, description=RUN_REF_HELP)]) -> str:
    return resolve_run_ref(store, run_id, "run_id", where="path")


RunId = Annotated[str, Depends(_path_run)]
"""A path parameter ``run_id`` naming a run in any form the CLI takes; the route receives the full id."""
RunRefQuery = Annotated[str, Query(max_length=200, description=RUN_REF_HELP)]
Text = Annotated[str | None, Query(max_length=255, pattern=TEXT_PATTERN)]
Limit = Annotated[int, Query(ge=1, le=1000, description="page size")]
Offset = Annotated[int, Query(ge=0, le=10_000_000, description="rows to skip")]


def suite_registry(request: Request) -> Registry:
    """Built-in and YAML suites (ORCH_SUITE_DIR), loaded once per app; bad suite files leave the built-ins (logged)."""
    reg: Registry | None = getattr(request.app.state, "registry", None)
    if reg is None:
        from orchestrator.suites.loader import load_registry
        from orchestrator.suites.registry import builtin_registry

        settings = get_settings(request)
        try:
            reg = load_registry([settings.suite_dir] if settings.suite_dir else [])
        except SuiteError as exc:
            _log.warning("suite files not loaded for the dashboard's plots: %s", exc.message)
            reg = builtin_registry()
        request.app.state.registry = reg
    return reg
