"""A trivial bench for tests and orch's own overhead benchmark: sleep ``ms`` milliseconds and time it.

Case params: ``ms`` (float, default 0), ``fail`` (optional message: raise RuntimeError with it instead).
"""

from __future__ import annotations

import time
from typing import Any

from ..stats import summarize


def run_case(case: dict[str, Any], ctx: Any) -> dict[str, Any]:
    ms = float(case.get("ms", 0.0))
    if ms < 0:
        raise ValueError(f"sleep: ms must be >= 0, got {ms!r}")
    if case.get("fail"):
        raise RuntimeError(str(case["fail"]))
    t0 = time.perf_counter()
    time.sleep(ms / 1000.0)
    elapsed_ms = (time.perf_counter() - t0) * 1000.0
    return {
        "metrics": {"time_ms": summarize([elapsed_ms], "ms")},
        "info": {"timing": "time.perf_counter around time.sleep", "device": "cpu"},
    }
