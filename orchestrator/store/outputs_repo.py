"""What the store recorded of the outputs a ``command`` suite's runs kept on their hosts — the query behind the
check of ``orch runs logs`` / ``GET /api/v1/runs/{id}/logs`` (orchestrator/runlogs.py).

Each ok result of a ``command`` case carries ``info.files`` (the agent's ``benches/command.py``): per timed run
``{"stdout"|"stderr"|"output": {"path", "bytes", "sha256"}}``, computed on the host when the case ended. Whatever
``agent logs`` later reads from the host is compared with these."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from orchestrator.store.models import Result

if TYPE_CHECKING:
    from orchestrator.store.repo import Store

StoredFile = dict[str, Any]
"""``{"bytes": int, "sha256": str}`` of one stream of one timed run, as the host measured it when the case ended."""

StoredOutputs = dict[str, dict[int, list[dict[str, StoredFile]]]]
"""host -> case index -> per timed run (list position = run number k of ``outputs/<case>/<k>.<stream>``)
``{stream: StoredFile}``."""


def _files(info: Any) -> list[dict[str, StoredFile]] | None:
    files = info.get("files") if isinstance(info, dict) else None
    if not isinstance(files, list):
        return None
    runs: list[dict[str, StoredFile]] = []
    for f in files:
        run: dict[str, StoredFile] = {}
        for stream, v in (f.items() if isinstance(f, dict) else ()):
            if isinstance(v, dict) and isinstance(v.get("bytes"), int) and isinstance(v.get("sha256"), str):
                run[str(stream)] = {"bytes": v["bytes"], "sha256": v["sha256"]}
        runs.append(run)
    return runs


def stored_outputs(store: Store, run_id: str, host: str | None = None) -> StoredOutputs:
    """The outputs recorded with run ``run_id``'s ok results (of ``host`` only, when given), by host and case
    index; a result without ``info.files`` (not a command suite, or a case that failed) adds nothing."""
    q = select(Result.host, Result.case_index, Result.info).where(Result.run_id == run_id, Result.status == "ok")
    if host is not None:
        q = q.where(Result.host == host)
    with store._read() as s:
        rows = s.execute(q.order_by(Result.seq)).all()
    out: StoredOutputs = {}
    for h, case_index, info in rows:
        runs = _files(info)
        if case_index is None or runs is None:
            continue
        out.setdefault(h, {})[int(case_index)] = runs
    return out
