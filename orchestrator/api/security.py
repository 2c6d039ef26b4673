"""The listening policy of ``orch serve`` — pure: a real write token, or no listening beyond loopback."""

from __future__ import annotations

import ipaddress

from pydantic import SecretStr

from orchestrator.errors import ConfigError

MIN_TOKEN_CHARS = 16
PLACEHOLDER_TOKENS = frozenset(
    {"changeme", "change-me", "change_me", "token", "secret", "password", "admin", "test", "default",
     "example", "xxx", "orch", "api-token", "your-token-here", "replace-me", "todo"}
)  # fmt: skip


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def token_problem(token: SecretStr | None) -> str | None:
    """Why ``token`` is not acceptable as a write token, or None when it is."""
    value = token.get_secret_value() if token is not None else ""
    if not value.strip():
        return "ORCH_API_TOKEN is empty"
    if value.strip().lower() in PLACEHOLDER_TOKENS or len(set(value)) == 1:
        return "ORCH_API_TOKEN is a placeholder"
    if len(value) < MIN_TOKEN_CHARS:
        return f"ORCH_API_TOKEN is shorter than {MIN_TOKEN_CHARS} characters"
    return None


def check_listen_policy(host: str, token: SecretStr | None) -> None:
    """Raise ConfigError when listening on ``host`` beyond loopback with an empty or placeholder token."""
    if is_loopback(host):
        return
    problem = token_problem(token)
    if problem:
        raise ConfigError(
            f"refusing to listen on {host}: {problem}",
            'set a real token, e.g. export ORCH_API_TOKEN="$(openssl rand -hex 32)", or listen on 127.0.0.1',
        )
