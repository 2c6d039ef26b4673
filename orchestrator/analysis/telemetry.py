"""Was the GPU running at full clocks while it was measured? The verdict on one case's telemetry — pure.

Input: ``info.telemetry`` of a result (or ``telemetry`` of an error), as the agent's ``telemetry.py`` writes it:
per-reason sample counts of nvidia-smi's ``clocks_event_reasons.active`` bitmask, the count of busy samples
whose SM clock was under ``low_clock_ratio`` x ``clocks.max.sm``, and the compute processes of other sessions
seen on the case's GPUs. See docs/telemetry.md.

- **throttled** when any sample carried a throttling reason — SW power cap, HW slowdown, SW/HW thermal slowdown,
  HW power brake, sync boost — or a busy sample ran below the clock threshold. Idle, applications-clocks and
  display-clock settings are not throttling (NVML's ``nvmlClocksEventReason*`` meanings, nvml.h). None when no
  GPU sample was taken (no nvidia-smi, or it failed): unknown, not "fine".
- **shared_gpu** when another process (not this run's session) used one of the case's GPUs during the case.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.protocol import Event

THROTTLE_REASONS = (
    "sw_power_cap",
    "hw_slowdown",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sync_boost",
)
REASON_TEXT = {
    "sw_power_cap": "power cap",
    "hw_slowdown": "HW slowdown",
    "sw_thermal_slowdown": "thermal (SW)",
    "hw_thermal_slowdown": "thermal (HW)",
    "hw_power_brake_slowdown": "power brake",
    "sync_boost": "sync boost",
}


@dataclass(frozen=True)
class Verdict:
    """``throttled``/``shared_gpu``: True, False, or None (unknown); ``reason``: one line naming what was seen
    with its share of the samples, e.g. ``power cap in 12/80 samples``; ``samples``: GPU samples judged."""

    throttled: bool | None
    shared_gpu: bool | None
    reason: str | None
    samples: int

    def to_info(self) -> dict[str, Any]:
        return {"throttled": self.throttled, "shared_gpu": self.shared_gpu, "throttle_reason": self.reason}


def judge(tel: Any) -> Verdict:
    """The verdict on one case's telemetry summary (module docstring). Never raises."""
    if not isinstance(tel, dict):
        return Verdict(None, None, None, 0)
    raw_n = tel.get("samples")
    n: int = raw_n if isinstance(raw_n, int) else 0
    others = [p for p in tel.get("other_processes") or [] if isinstance(p, dict)]
    shared = bool(others) if n or tel.get("other_processes") is not None else None
    parts: list[str] = []
    raw_reasons = tel.get("reasons")
    reasons: dict[str, Any] = raw_reasons if isinstance(raw_reasons, dict) else {}
    for key in THROTTLE_REASONS:
        count = reasons.get(key)
        if isinstance(count, int) and count > 0:
            parts.append(f"{REASON_TEXT[key]} in {count}/{n} samples")
    low = tel.get("low_clock_samples")
    if isinstance(low, int) and low > 0:
        ratio = tel.get("low_clock_ratio", 0.9)
        parts.append(f"SM clock under {ratio:.0%} of max in {low}/{n} busy samples")
    if others:
        parts.append("shared GPU with " + ", ".join(f"pid {p.get('pid')} ({p.get('name')})" for p in others[:3]))
    throttled = None if not n else any(not p.startswith("shared GPU") for p in parts)
    return Verdict(throttled, shared, "; ".join(parts) or None, n)


def mark(ev: Event) -> Event:
    """A result (or error) event with the verdict on its telemetry added to ``info`` (``throttled``,
    ``shared_gpu``, ``throttle_reason``); events without telemetry pass unchanged."""
    if ev.type == "result":
        info = ev.data.get("info")
        tel = info.get("telemetry") if isinstance(info, dict) else None
    elif ev.type == "error":
        info, tel = None, ev.data.get("telemetry")
    else:
        return ev
    if not isinstance(tel, dict):
        return ev
    data = dict(ev.data)
    data["info"] = {**(info if isinstance(info, dict) else {}), **judge(tel).to_info()}
    if ev.type == "error":
        data["info"]["telemetry"] = tel
    return Event(seq=ev.seq, type=ev.type, ts=ev.ts, v=ev.v, data=data)
