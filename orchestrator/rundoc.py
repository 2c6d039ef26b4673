"""The one JSON shape of a run for ``orch run --json`` and ``orch runs show --json`` — pure (takes store records).

Both commands print::

    {"run_id": str, "suite": str, "status": "completed|partial|failed|cancelled|running", "label": str | null,
     "hosts": [{"host": str, "status": "completed|partial|failed|cancelled|running", "results": int,
                "errors": int, "warnings": int, "error": str | null,
                "earlier_errors": [{"status": str, "error": str, "finished_at": str}],
                "plateau_from_m": int | null, "compute_bound_from_m": int | null, "plateau": {...} | null}]}

``error`` is only the reason for the host's current status (null for a completed host); the errors of earlier
attempts that a resume followed again are ``earlier_errors``, oldest first (``HostRunRecord.earlier_errors``).
``results``/``errors`` count the host's stored result and error rows; ``warnings`` counts its results that carry
a warning (``info.warnings``: e.g. a serving benchmark with failed requests). A host is ``partial`` when it
finished with some failed cases. ``plateau`` (moe-sweep only) is :meth:`analysis.plateau.Plateau.to_dict`,
computed from the host's stored results, so an imported or resumed run gets the same figures; its
``plateau_from_m`` / ``compute_bound_from_m`` are repeated on the host entry. A run submitted through Slurm adds
``"slurm": {"group", "job_id", "state", "reason", "nodes", "ended"}`` (Slurm's state and reason as last seen, the
allocated node names, and how the job ended). ``orch runs show --json`` adds
``"run"`` (the stored run with its host runs) and ``"results"`` (every result row, a list); ``orch run --json``
adds each host's ``"hint"`` (what to do about its error, or null) and ``"state_dir"`` (where the host keeps the run:
spool, spec, outputs) and takes the status it just saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from orchestrator.analysis.plateau import Plateau, moe_points, sweep_plateau
from orchestrator.store.records import ResultRecord, RunDetail


def result_warnings(r: ResultRecord) -> list[str]:
    """The warnings stored with a result (``info.warnings``), as strings."""
    w = (r.info or {}).get("warnings") if isinstance(r.info, dict) else None
    return [str(x) for x in w] if isinstance(w, list) else []


def host_plateau(suite: str, results: Sequence[ResultRecord]) -> Plateau | None:
    """moe-sweep's plateau over a host's ok results (None for other suites or without any point)."""
    if suite != "moe-sweep":
        return None
    points = moe_points((r.case, r.metrics) for r in results if r.status == "ok")
    return sweep_plateau(points) if points else None


def host_status(stored: str, errors: int) -> str:
    """A host run is stored completed/failed/cancelled/running; one that completed with failed cases is partial."""
    return "partial" if stored == "completed" and errors else stored


def run_document(run: RunDetail, results: Sequence[ResultRecord], *, full: bool = False) -> dict[str, Any]:
    """The shared JSON document of a run (module docstring); ``full`` adds ``run`` and ``results``."""
    by_host: dict[str, list[ResultRecord]] = {}
    for r in results:
        by_host.setdefault(r.host, []).append(r)
    hosts = []
    for h in run.host_runs:
        rows = by_host.get(h.host, [])
        p = host_plateau(run.suite, rows)
        hosts.append(
            {
                "host": h.host,
                "status": host_status(h.status, h.errors),
                "results": h.results,
                "errors": h.errors,
                "warnings": sum(1 for r in rows if result_warnings(r)),
                "error": h.error,
                "earlier_errors": h.earlier_errors,
                "plateau_from_m": p.plateau_from_m if p else None,
                "compute_bound_from_m": p.compute_bound_from_m if p else None,
                "plateau": p.to_dict() if p else None,
            }
        )
    doc: dict[str, Any] = {
        "run_id": run.id,
        "suite": run.suite,
        "status": run.status,
        "label": run.label,
        "hosts": hosts,
    }
    slurm = (run.info or {}).get("slurm")
    if isinstance(slurm, dict):  # a run submitted through Slurm: its job and the scheduler's state and reason
        doc["slurm"] = {k: slurm.get(k) for k in ("group", "job_id", "state", "reason", "nodes", "ended")}
    if full:
        doc["run"] = asdict(run)
        doc["results"] = [asdict(r) for r in results]
    return doc
