"""Helpers shared by the store and API tests: event builders and a seeded store."""

from __future__ import annotations

from typing import Any

from orchestrator.protocol import Event


def result_event(seq: int, m: int, time_ms: float, *, gbps: float | None = None, **case: Any) -> Event:
    metrics: dict[str, Any] = {
        "time_ms": {"value": time_ms, "unit": "ms", "median": time_ms, "p10": time_ms * 0.95,
                    "p90": time_ms * 1.05, "min": time_ms * 0.9, "max": time_ms * 1.1, "n": 3,
                    "samples": [time_ms * 0.95, time_ms, time_ms * 1.05]},
    }  # fmt: skip
    if gbps is not None:
        metrics["gbps"] = {"value": gbps, "unit": "GB/s", "median": gbps}
    return Event(
        seq=seq, type="result", ts=1_700_000_000.0 + seq,
        data={"case_index": seq, "case": {"M": m, "E": 8, "seed": seq, **case}, "metrics": metrics},
    )  # fmt: skip


def hello(seq: int = 0) -> Event:
    return Event(
        seq=seq,
        type="hello",
        data={"agent_version": "a" * 64, "facts": {"gpus": [{"name": "NVIDIA H200"}]}, "cases_total": 4},
    )
