"""GPU leases as ``orch doctor`` shows them — pure.

The agent holds one lease per GPU UUID while a run's worker lives (``agents/orch_agent/leases.py``: a flock on
``/dev/shm/orch-leases/<uuid>.lock``, node-local). The host's facts list them (``facts["leases"]``: ``{"dir",
"held": [...], "stale": [...]}``, each ``{gpu, run_id, host, user, started_by, pid, started}``): *held* while
the holder runs, *stale* when the lock is free but its holder's record is left (the holder died without
clearing it; harmless: the next run takes the lock and overwrites it).
"""

from __future__ import annotations

from typing import Any


def describe(entry: dict[str, Any]) -> str:
    """``GPU-… by run R (alice@laptop as root, since 2026-11-30T07:00:00Z, pid 123)``."""
    who = entry.get("started_by") or "?"
    return (
        f"{entry.get('gpu')} by run {entry.get('run_id') or '?'} ({who} as {entry.get('user') or '?'}, "
        f"since {entry.get('started') or '?'}, pid {entry.get('pid') or '?'})"
    )


def lease_summary(facts: dict[str, Any]) -> tuple[str, dict[str, Any], bool]:
    """``(detail text, data for the check, any stale)`` from the host's facts; empty text when no lease."""
    raw = facts.get("leases")
    if not isinstance(raw, dict):
        return "", {}, False
    held = [e for e in raw.get("held") or [] if isinstance(e, dict)]
    stale = [e for e in raw.get("stale") or [] if isinstance(e, dict)]
    parts = []
    if held:
        parts.append("leased: " + "; ".join(describe(e) for e in held))
    if stale:
        parts.append("stale lease (holder dead): " + "; ".join(describe(e) for e in stale))
    data = {"leases": {"dir": raw.get("dir"), "held": held, "stale": stale}}
    return "; ".join(parts), data, bool(stale)
