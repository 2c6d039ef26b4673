"""Suite ``env`` values are secrets unless the suite marks them public — pure.

A suite file's ``env`` passes values to the benchmark command on the host (``HF_TOKEN: ...``). They reach the host
in the run's spec and stay in clear only in the host's run directory; everything orch keeps or shows elsewhere —
the store (the host run's ``info.spec``), the API, ``orch suites show``, ``orch runs show``, logs — carries
:data:`REDACTED` instead, and every event from the host is scrubbed of the values before it is stored (a tool
that echoes its environment in an error message leaks nothing). A value the suite marks public
(``env: {NCCL_NVLS_ENABLE: {value: "0", public: true}}``) is kept.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from orchestrator.protocol import Event

REDACTED = "***"
MIN_SCRUB_CHARS = 4
"""Values shorter than this are redacted where they are named but not searched for in free text: replacing every
"0" or "on" in a tool's output would destroy it, and such a value is no secret."""


def redact_env(env: Mapping[str, str], public: Collection[str]) -> dict[str, str]:
    """``env`` with every value not named in ``public`` replaced by :data:`REDACTED`."""
    return {k: v if k in public else REDACTED for k, v in env.items()}


def redact_spec(spec: Mapping[str, Any], public: Collection[str]) -> dict[str, Any]:
    """A copy of a resolved run spec (``{"cases": [{..., "env": {...}}], ...}``) with each case's env redacted."""
    out = dict(spec)
    cases = spec.get("cases")
    if isinstance(cases, list):
        out["cases"] = [
            {**c, "env": redact_env(c["env"], public)} if isinstance(c, dict) and isinstance(c.get("env"), dict) else c
            for c in cases
        ]
    return out


def secret_values(spec: Mapping[str, Any], public: Collection[str]) -> tuple[str, ...]:
    """The secret env values of a spec's cases worth searching for (at least :data:`MIN_SCRUB_CHARS`), longest
    first (a secret that contains another is replaced whole)."""
    found: set[str] = set()
    for case in spec.get("cases") or []:
        env = case.get("env") if isinstance(case, dict) else None
        if isinstance(env, dict):
            found |= {v for k, v in env.items() if k not in public and isinstance(v, str) and len(v) >= MIN_SCRUB_CHARS}
    return tuple(sorted(found, key=lambda v: (-len(v), v)))


def scrub(value: Any, secrets: Iterable[str]) -> Any:
    """``value`` (JSON-like) with every occurrence of a secret in any string (keys included) replaced."""
    secrets = tuple(secrets)
    if not secrets:
        return value
    if isinstance(value, str):
        for s in secrets:
            if s in value:
                value = value.replace(s, REDACTED)
        return value
    if isinstance(value, dict):
        return {scrub(k, secrets): scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub(v, secrets) for v in value]
    return value


def scrub_event(ev: Event, secrets: Collection[str]) -> Event:
    """``ev`` with the secrets scrubbed from its data (the same event when none occurs)."""
    if not secrets:
        return ev
    data = scrub(ev.data, secrets)
    return ev if data == ev.data else Event(seq=ev.seq, type=ev.type, ts=ev.ts, v=ev.v, data=data)
