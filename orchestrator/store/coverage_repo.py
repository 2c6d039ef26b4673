"""What a head run holds of its base run's cases — the queries behind ``orch runs check``'s completeness rule
(docs/statistics.md, "orch runs check", step 0).

A comparison pairs only the cases both runs measured, so a head run that lost cases (a failed case, a host that
died, a rerun of a subset) would otherwise be judged on what is left and pass. ``coverage`` lists, for one
metric, the base cases the head run has no ok result of and the head run's failed cases (error rows that name a
case), each with its host and parameters."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from orchestrator.store.models import Result

if TYPE_CHECKING:
    from orchestrator.store.repo import Store

_Key = tuple[str | None, str]


@dataclass(frozen=True)
class CaseRef:
    """One case of a run: ``host`` (None when the runs are paired on the case alone), its parameters, and for
    a failed case the stored error text."""

    host: str | None
    case_key: str
    case: dict[str, Any]
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "case": self.case, **({"error": self.error} if self.error is not None else {})}


@dataclass(frozen=True)
class Coverage:
    """``missing``: base cases (with ``metric``) the head run has no ok result of, in base order; ``failed``:
    the head run's error rows that name a case, in head order; ``head_cases``/``base_cases``: how many cases
    each side measured; ``by_host``: whether cases are told apart by host (the runs share a host)."""

    metric: str | None
    base_cases: int
    head_cases: int
    by_host: bool
    missing: list[CaseRef] = field(default_factory=list)
    failed: list[CaseRef] = field(default_factory=list)


def _has(metrics: Any, metric: str | None) -> bool:
    if metric is None:
        return True
    m = metrics.get(metric) if isinstance(metrics, dict) else None
    return isinstance(m, dict) and (m.get("median") is not None or m.get("value") is not None)


def coverage(store: Store, base: str, head: str, metric: str | None) -> Coverage:
    """The completeness of run ``head`` against run ``base`` for ``metric`` (None: any ok result counts).

    Cases are keyed (host, case_key) when the two runs' ok results share a host — then a case of a base host
    the head did not run is missing too — else (None, case_key), as ``Store.compare`` pairs them."""
    with store._read() as s:
        rows = s.execute(
            select(Result.run_id, Result.host, Result.case_key, Result.case_params, Result.status,
                   Result.case_index, Result.metrics, Result.error)
            .where(Result.run_id.in_([base, head]))
            .order_by(Result.id)
        ).all()  # fmt: skip
    ok: dict[str, list[tuple[str, str, dict[str, Any]]]] = {base: [], head: []}
    errors: list[tuple[str, str, dict[str, Any], str | None]] = []
    for run_id, host, key, params, status, case_index, metrics, error in rows:
        if status == "ok" and _has(metrics, metric):
            ok[run_id].append((host, key, params or {}))
        elif run_id == head and status != "ok" and (params or case_index is not None):
            errors.append((host, key, params or {}, error))
    by_host = bool({h for h, _, _ in ok[base]} & {h for h, _, _ in ok[head]})

    def k(host: str, key: str) -> _Key:
        return (host if by_host else None, key)

    head_keys = {k(h, key) for h, key, _ in ok[head]}
    base_keys: dict[_Key, dict[str, Any]] = {}
    for h, key, params in ok[base]:
        base_keys.setdefault(k(h, key), params)
    missing = [CaseRef(hk[0], hk[1], params) for hk, params in base_keys.items() if hk not in head_keys]
    failed: list[CaseRef] = []
    seen: set[_Key] = set()
    for h, key, params, error in errors:
        if (h, key) in seen:
            continue
        seen.add((h, key))
        failed.append(CaseRef(h, key, params, (error or "").strip().splitlines()[0][:200] if error else None))
    return Coverage(metric, len(base_keys), len(head_keys), by_host, missing, failed)
