"""The header lines of ``orch runs show`` that say what a run was asked for, in the CLI's own words, and which
preset it ran with — pure (a run record in, text out)."""

from __future__ import annotations

import shlex
from typing import Any


def asked_argv(params: dict[str, Any]) -> list[str]:
    """The options of ``orch run`` that give ``params`` (the run's stored ``{"sets": {NAME: VALUE}, "repeat",
    "seed", "preset"}``, ``preset`` being what was asked, absent in runs stored before it was kept):
    ``["--set", "M=1,8", "--repeat", "20", "--preset", "tiny"]``; ``[]`` for the suite's defaults."""
    argv: list[str] = []
    for name, value in (params.get("sets") or {}).items():
        text = ",".join(str(v) for v in value) if isinstance(value, list | tuple) else str(value)
        argv += ["--set", f"{name}={text}"]
    for key in ("repeat", "seed", "preset"):
        if params.get(key) is not None:
            argv += [f"--{key}", str(params[key])]
    return argv


def asked_line(params: dict[str, Any]) -> str:
    """``asked: --set M=1,8 --repeat 20`` (quoted as a shell would need), or ``asked: defaults``; for a run
    made by ``orch runs import`` (its options were never seen) ``asked: unknown (imported from PATH)``."""
    if params.get("imported_from"):
        return f"asked: unknown (imported from {params['imported_from']})"
    argv = asked_argv(params)
    return "asked: " + (shlex.join(argv) if argv else "defaults")


def preset_line(run: Any) -> str:
    """Which preset the run used: ``preset: tiny`` when asked for, ``preset: tiny (chosen by orch for the
    hosts: the suite's default for a CPU or CUDA host)`` when not, per host when the hosts ran different ones
    (``info.preset`` of each host run), ``preset: none`` when the suite has none."""
    params = run.params or {}
    per_host = {h.host: (h.info or {}).get("preset") for h in run.host_runs if (h.info or {}).get("preset")}
    if run.preset:
        asked = "preset" not in params or params.get("preset") == run.preset
        return f"preset: {run.preset}" + ("" if asked else " (chosen by orch: the suite's default for the hosts)")
    if len(set(per_host.values())) == 1:  # a run stored before the run kept its hosts' choice
        return f"preset: {next(iter(per_host.values()))} (chosen by orch: the suite's default for the hosts)"
    if len(set(per_host.values())) > 1:
        return "preset per host (the suite's default for each): " + ", ".join(f"{h} {p}" for h, p in per_host.items())
    return "preset: none"
