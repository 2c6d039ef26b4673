"""Process-wide settings, read from the environment (``ORCH_*``) and CLI flags.

Built once in an entry point (``cli/main.py``, ``api/app.py``'s factory) and passed down; nothing here runs at
import time. Plain code, not pydantic-settings: every ``orch`` command builds one before doing anything else, and
importing pydantic-settings (with pydantic) cost ~0.2-0.35 s of each command's start (issue 21's inner loop).
The semantics are pydantic-settings' for these fields: an explicit argument wins over the environment, names are
matched case-insensitively, unknown ``ORCH_*`` variables are ignored. A value that does not parse is a
ConfigError naming the variable (exit 2).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from orchestrator.errors import ConfigError

if TYPE_CHECKING:
    from pydantic import SecretStr

DEFAULT_DB_URL = "sqlite:///./orch.db"
ENV_PREFIX = "ORCH_"
_UNSET: Any = object()


def _secret(value: object) -> SecretStr | None:
    """``value`` as pydantic's SecretStr (its repr hides it; the API compares it in constant time); pydantic is
    imported only when a token is set (``orch serve``)."""
    if value is None:
        return None
    from pydantic import SecretStr

    return value if isinstance(value, SecretStr) else SecretStr(str(value))


def _number(name: str, value: object, kind: type[float] | type[int], minimum: float, strict: bool) -> Any:
    try:
        num = kind(value)  # type: ignore[arg-type,call-overload]
    except (TypeError, ValueError):
        num = None
    if num is None or num < minimum or (strict and num == minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise ConfigError(
            f"{ENV_PREFIX}{name.upper()} / {name}={value!r} is not a number {bound}",
            f"set it to a {'whole ' if kind is int else ''}number {bound}, or unset it for the default",
        )
    return num


class Settings:
    """orch's settings.

    Environment variables carry the ``ORCH_`` prefix: ``ORCH_DB_URL``, ``ORCH_INVENTORY``, ``ORCH_API_TOKEN``,
    ``ORCH_API_READ_TOKEN``, ``ORCH_CORS_ORIGINS`` (comma list), ``ORCH_CONNECT_TIMEOUT_S`` (s, > 0, default 10),
    ``ORCH_COMMAND_TIMEOUT_S`` (s, > 0, default 60), ``ORCH_MAX_CONCURRENCY`` (hosts, >= 1, default 64),
    ``ORCH_SUITE_DIR``, ``ORCH_WORKER_STOPPED_S`` (s, > 0, default 300: a host whose agent worker has been stopped
    this long — SIGSTOP, a debugger, a suspended job — fails with that said, instead of being waited on),
    ``ORCH_FOLLOWER_SILENT_S`` (s, > 0, default 60: the agent process that streams a host's spool to orch — not the
    worker — sends a heartbeat every tenth of this, within [0.1, 5] s; one silent this long, stopped or wedged, is
    killed and the spool followed again from the last stored line, counted in the host's ``reconnects``). Keyword
    arguments override them; ``env`` (default ``os.environ``) is where they are read.
    """

    FIELDS: ClassVar[tuple[str, ...]] = (
        "db_url", "inventory", "api_token", "api_read_token", "cors_origins", "connect_timeout_s",
        "command_timeout_s", "max_concurrency", "suite_dir", "worker_stopped_s", "follower_silent_s",
    )  # fmt: skip; each read from ORCH_<NAME>

    db_url: str
    inventory: Path
    api_token: SecretStr | None
    api_read_token: SecretStr | None
    cors_origins: str
    connect_timeout_s: float  # TCP + SSH handshake + auth deadline, s
    command_timeout_s: float  # default deadline per remote command, s
    max_concurrency: int  # hosts contacted at once
    suite_dir: Path | None
    worker_stopped_s: float  # a stopped agent worker is reported after this long, s
    follower_silent_s: float  # a follower silent this long (no line, no heartbeat) is killed and replaced, s

    def __init__(
        self,
        *,
        db_url: str = _UNSET,
        inventory: Path | str = _UNSET,
        api_token: SecretStr | str | None = _UNSET,
        api_read_token: SecretStr | str | None = _UNSET,
        cors_origins: str = _UNSET,
        connect_timeout_s: float = _UNSET,
        command_timeout_s: float = _UNSET,
        max_concurrency: int = _UNSET,
        suite_dir: Path | str | None = _UNSET,
        worker_stopped_s: float = _UNSET,
        follower_silent_s: float = _UNSET,
        env: dict[str, str] | None = None,
    ) -> None:
        source = os.environ if env is None else env
        found = {k[len(ENV_PREFIX) :].lower(): v for k, v in source.items() if k.upper().startswith(ENV_PREFIX)}

        def get(name: str, given: Any, default: Any) -> Any:
            return given if given is not _UNSET else found.get(name, default)

        self.db_url = str(get("db_url", db_url, DEFAULT_DB_URL))
        self.inventory = Path(get("inventory", inventory, "inventory.yaml"))
        self.api_token = _secret(get("api_token", api_token, None))
        self.api_read_token = _secret(get("api_read_token", api_read_token, None))
        self.cors_origins = str(get("cors_origins", cors_origins, ""))
        self.connect_timeout_s = _number("connect_timeout_s", get("connect_timeout_s", connect_timeout_s, 10.0),
                                         float, 0, strict=True)  # fmt: skip
        self.command_timeout_s = _number("command_timeout_s", get("command_timeout_s", command_timeout_s, 60.0),
                                         float, 0, strict=True)  # fmt: skip
        self.max_concurrency = _number("max_concurrency", get("max_concurrency", max_concurrency, 64),
                                       int, 1, strict=False)  # fmt: skip
        self.worker_stopped_s = _number("worker_stopped_s", get("worker_stopped_s", worker_stopped_s, 300.0),
                                        float, 0, strict=True)  # fmt: skip
        self.follower_silent_s = _number("follower_silent_s", get("follower_silent_s", follower_silent_s, 60.0),
                                         float, 0, strict=True)  # fmt: skip
        sd = get("suite_dir", suite_dir, None)
        self.suite_dir = Path(sd) if sd not in (None, "") else None

    def __repr__(self) -> str:  # tokens show as SecretStr does: '**********'
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"Settings({fields})"

    def cors_origin_list(self) -> list[str]:
        return [o.strip() for o in self.cors_origins.split(",") if o.strip()]
