"""The run spec the orchestrator sends to ``start`` (written by its suite registry).

``{"run_id": str, "suite": str, "bench": "moe_gemm"|"hbm"|"sleep", "cases": [{param: value, ...}, ...],
"repeat": int (timed samples per case, default 20), "warmup": int (default 5), "device": "auto"|"cuda"|"cpu"
(default "auto"), "seed": int (default 0), "lease_wait_s": float (how long ``start`` waits for GPUs leased by
another run, s; default 0: refuse at once), "started_by": "user@machine" of orch (named in lease records),
"facts": the host facts orch collected}``. Unknown top-level keys are kept.
"""

from __future__ import annotations

from typing import Any

from .benches import BENCHES
from .runs import valid_run_id

DEFAULTS: dict[str, Any] = {"suite": "", "repeat": 20, "warmup": 5, "device": "auto", "seed": 0, "lease_wait_s": 0}
DEVICES = ("auto", "cuda", "cpu")


class SpecError(ValueError):
    pass


def _int(doc: dict[str, Any], key: str, minimum: int) -> None:
    v = doc[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise SpecError(f"spec {key!r} must be an integer >= {minimum}, got {v!r}")


def validate(doc: Any) -> dict[str, Any]:
    """The spec with defaults filled in; SpecError naming the bad field otherwise."""
    if not isinstance(doc, dict):
        raise SpecError("spec must be a JSON object")
    out = dict(DEFAULTS)
    out.update(doc)
    run_id = out.get("run_id")
    if not isinstance(run_id, str) or not valid_run_id(run_id):
        raise SpecError(f"spec 'run_id' must be a string of letters, digits, '._-' (got {run_id!r})")
    if not isinstance(out["suite"], str):
        raise SpecError("spec 'suite' must be a string")
    if out.get("bench") not in BENCHES:
        raise SpecError(
            "spec 'bench' must be one of {}, got {!r}".format(", ".join(BENCHES), out.get("bench"))
        )
    cases = out.get("cases")
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise SpecError("spec 'cases' must be a list of objects")
    _int(out, "repeat", 1)
    _int(out, "warmup", 0)
    _int(out, "seed", 0)
    w = out["lease_wait_s"]
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not w >= 0:
        raise SpecError(f"spec 'lease_wait_s' must be a number of seconds >= 0, got {w!r}")
    if out["device"] not in DEVICES:
        raise SpecError("spec 'device' must be one of {}, got {!r}".format(", ".join(DEVICES), out["device"]))
    return out
