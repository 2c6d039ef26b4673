"""Load stored runs into ``analysis.views``: the same views for the dashboard (``GET /api/v1/views``) and for
``orch runs plot``. Reads through ``Store`` only (every query lives in ``store/``)."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.analysis.views import HostIn, RowIn, RunIn, Views, build_views
from orchestrator.errors import SuiteError, UsageError
from orchestrator.store.repo import Store
from orchestrator.suites.registry import Registry, SuiteDef, builtin_registry

MAX_RUNS = 12
PAGE = 5000


def _rows(store: Store, run_id: str) -> list[RowIn]:
    rows: list[RowIn] = []
    offset = 0
    while True:
        page = store.results(run_id, status="ok", limit=PAGE, offset=offset)
        rows.extend(RowIn(host=r.host, case=r.case, metrics=r.metrics, info=r.info) for r in page.items)
        offset += len(page.items)
        if not page.items or offset >= page.total:
            return rows


def load_run(store: Store, run_id: str) -> RunIn:
    """One stored run (a full id) as the views read it: its hosts' GPU names and measured roofs, its ok results."""
    run = store.get_run(run_id)
    hosts = [
        HostIn(host=h.host, gpu_name=(h.facts or {}).get("gpu_name"), roof_gbps=h.measured_roof_gbps)
        for h in run.host_runs
    ]
    return RunIn(run_id=run.id, label=run.label, suite=run.suite, hosts=hosts, rows=_rows(store, run.id))


def suite_def(name: str, registry: Registry | None) -> SuiteDef | None:
    """The suite's definition, or None for a suite this orch does not know (its stored metrics are plotted)."""
    try:
        return (registry or builtin_registry()).get(name)
    except SuiteError:
        return None


def run_views(
    store: Store,
    refs: Sequence[str],
    *,
    registry: Registry | None = None,
    metric: str | None = None,
    x: str | None = None,
) -> Views:
    """The views of the runs ``refs`` name (full ids, short ids, prefixes, ``latest~N``), overlaid.

    Raises:
        UsageError: no run, more than ``MAX_RUNS``, a malformed or ambiguous reference, runs of different
            suites, an unknown metric or x.
        NotFoundError: a reference that names no run.
    """
    if not refs:
        raise UsageError("no run to plot", "name one or more runs, e.g. latest or a short id from `orch runs list`")
    if len(refs) > MAX_RUNS:
        raise UsageError(f"{len(refs)} runs given; at most {MAX_RUNS} are overlaid", "plot fewer runs at once")
    ids = list(dict.fromkeys(store.resolve_run_id(r) for r in refs))
    runs = [load_run(store, i) for i in ids]
    return build_views(runs, suite_def(runs[0].suite, registry), metric=metric, x=x)
