"""Migrations on SQLite and PostgreSQL: empty database to head, no drift from the models, data survives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from orchestrator.store import migrate
from orchestrator.store.models import Base
from orchestrator.store.repo import Store

TABLES = {"alembic_version", "builds", "hosts", "host_runs", "results", "runs"}


def _revisions() -> list[str]:
    """Every revision from base to head, oldest first."""
    script = ScriptDirectory.from_config(migrate.alembic_config())
    return [s.revision for s in reversed(list(script.walk_revisions("base", "heads")))]


def test_alembic_ini_and_orch_run_the_same_scripts() -> None:
    """`alembic` from the root (alembic.ini), `orch db upgrade` and these tests all use the top-level migrations/."""
    repo = Path(__file__).resolve().parents[2]
    from_ini = Path(ScriptDirectory.from_config(Config(str(repo / "alembic.ini"))).dir).resolve()
    assert from_ini == migrate.migrations_dir().resolve() == repo / "migrations"
    assert not (repo / "orchestrator" / "store" / "migrations").exists()


def test_single_head() -> None:
    script = ScriptDirectory.from_config(migrate.alembic_config())
    assert len(script.get_heads()) == 1


def test_upgrade_empty_database(db_url: str) -> None:
    store = Store.from_url(db_url)
    try:
        store.upgrade()
        store.upgrade()  # idempotent
        assert TABLES <= set(inspect(store.engine).get_table_names())
        assert migrate.current_revision(store.engine) == migrate.head_revision()
    finally:
        store.close()


def test_models_and_migrations_do_not_drift(db_url: str) -> None:
    store = Store.from_url(db_url)
    try:
        store.upgrade()
        with store.engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
            diff = compare_metadata(ctx, Base.metadata)
        assert diff == [], f"models differ from migrations; run `alembic revision --autogenerate`: {diff}"
    finally:
        store.close()


def _metrics_0001(seq: int) -> dict[str, Any]:
    """Revision 0001's metrics document: raw samples inside each metric (seq 3 has none, seq 4 is an error)."""
    if seq == 4:
        return {}
    time_ms: dict[str, Any] = {"value": 1.0 + seq, "unit": "ms", "median": 1.0 + seq, "n": 3}
    if seq != 3:
        time_ms["samples"] = [0.5 + seq, 1.0 + seq, 1.5 + seq]
    metrics: dict[str, Any] = {"time_ms": time_ms, "gbps": {"value": 100.0 * (seq + 1), "unit": "GB/s"}}
    if seq == 2:
        metrics["gbps"]["samples"] = [99.0, 100.0]
    return metrics


def _seed_0001(conn: Connection, *, split_samples: bool = False) -> str:
    """Rows as revision 0001 knows them, written with plain SQL (today's models may have moved on).
    ``split_samples``: as revision 0002 knows them (raw samples in ``results.samples``, NULL when none)."""
    ts = "2025-01-01 00:00:00.000000" + ("+00:00" if conn.dialect.name == "postgresql" else "")
    run_id = "0190a8b2-0000-7000-8000-000000000001"
    conn.execute(
        text("INSERT INTO hosts (name, labels, first_seen, last_seen) VALUES ('h1', '{}', :ts, :ts)"),
        {"ts": ts},
    )
    conn.execute(
        text(
            "INSERT INTO runs (id, suite, params, status, started_by, started_on, started_at, info) "
            "VALUES (:id, 'moe-sweep', '{}', 'completed', 't@t', 't', :ts, '{}')"
        ),
        {"id": run_id, "ts": ts},
    )
    conn.execute(
        text(
            "INSERT INTO host_runs (run_id, host, status, last_seq, results, errors, info) "
            "VALUES (:id, 'h1', 'completed', 4, 4, 1, '{}')"
        ),
        {"id": run_id},
    )
    for seq in range(5):
        metrics = _metrics_0001(seq)
        row = {"id": run_id, "seq": seq, "status": "error" if seq == 4 else "ok", "case": f'{{"M": {2**seq}}}',
               "key": f"k{seq}", "m": 2**seq}  # fmt: skip
        if not split_samples:
            conn.execute(
                text(
                    "INSERT INTO results (run_id, host, seq, status, case_params, case_key, m, metrics) "
                    "VALUES (:id, 'h1', :seq, :status, :case, :key, :m, :metrics)"
                ),
                {**row, "metrics": json.dumps(metrics)},
            )
            continue
        samples = {k: m.pop("samples") for k, m in metrics.items() if "samples" in m}
        conn.execute(
            text(
                "INSERT INTO results (run_id, host, seq, status, case_params, case_key, m, metrics, samples) "
                "VALUES (:id, 'h1', :seq, :status, :case, :key, :m, :metrics, :samples)"
            ),
            {**row, "metrics": json.dumps(metrics), "samples": json.dumps(samples) if samples else None},
        )
    return run_id


def _seed_0002(conn: Connection) -> str:
    return _seed_0001(conn, split_samples=True)


# One seed per revision that may be the "previous" one. Adding revision N+1 needs nothing new here until
# revision N+2 arrives; a missing seed fails the test so that nobody skips the check by accident.
SEEDS: dict[str, Callable[[Connection], str]] = {
    "0001": _seed_0001,
    "0002": _seed_0002,
    "0003": _seed_0002,
    "i16stats": _seed_0002,
}


def _previous_revisions() -> list[str]:
    revs = _revisions()
    return revs[:-1] if len(revs) > 1 else revs  # with one revision: seed at it (base→head), upgrade again


@pytest.mark.parametrize("rev", _previous_revisions())
def test_upgrade_from_previous_revision_keeps_rows(db_url: str, rev: str) -> None:
    assert rev in SEEDS, f"write a SQL seed for revision {rev} in SEEDS"
    store = Store.from_url(db_url)
    try:
        migrate.upgrade(store.engine, rev)
        with store.engine.begin() as conn:
            run_id = SEEDS[rev](conn)
        before = _counts(store)
        migrate.upgrade(store.engine)
        assert _counts(store) == before
        run = store.get_run(run_id)
        assert run.status == "completed" and (run.results, run.errors) == (4, 1)
        assert [r.m for r in store.results(run_id).items] == [1, 2, 4, 8, 16]
        # every sample survives, and the statistics no longer carry them
        assert [r.metrics for r in store.results(run_id, samples=True).items] == [_metrics_0001(i) for i in range(5)]
        assert all("samples" not in m for r in store.results(run_id).items for m in r.metrics.values())
    finally:
        store.close()


def test_samples_move_out_of_metrics_and_back(db_url: str) -> None:
    """0001 → 0002 splits metrics into statistics and samples (SQL NULL when none); 0002 → 0001 joins them."""
    store = Store.from_url(db_url)
    try:
        migrate.upgrade(store.engine, "0001")
        with store.engine.begin() as conn:
            run_id = _seed_0001(conn)
        before = _raw_metrics(store)
        migrate.upgrade(store.engine, "0002")
        with store.engine.connect() as conn:
            rows = conn.execute(text("SELECT seq, metrics, samples FROM results ORDER BY seq")).all()
        stored = {seq: (_loads(m), _loads(smp)) for seq, m, smp in rows}
        assert stored[0] == (
            {"time_ms": {"value": 1.0, "unit": "ms", "median": 1.0, "n": 3}, "gbps": {"value": 100.0, "unit": "GB/s"}},
            {"time_ms": [0.5, 1.0, 1.5]},
        )
        assert stored[2][1] == {"time_ms": [2.5, 3.0, 3.5], "gbps": [99.0, 100.0]}
        assert stored[3][1] is None and stored[4] == ({}, None)
        with store.engine.connect() as conn:
            nulls = conn.execute(text("SELECT count(*) FROM results WHERE samples IS NULL")).scalar_one()
        assert nulls == 2
        _downgrade(store, "0001")
        assert _raw_metrics(store) == before
        assert store.schema_revision() == "0001" and run_id
    finally:
        store.close()


def _loads(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _raw_metrics(store: Store) -> dict[int, Any]:
    with store.engine.connect() as conn:
        return {seq: _loads(m) for seq, m in conn.execute(text("SELECT seq, metrics FROM results"))}


def _downgrade(store: Store, revision: str) -> None:
    cfg = migrate.alembic_config()
    with store.engine.connect() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)
        conn.commit()


def _counts(store: Store) -> dict[str, int]:
    with store.engine.connect() as conn:
        return {
            t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()
            for t in sorted(TABLES - {"alembic_version"})
        }


def test_orch_db_upgrade_from_any_cwd(tmp_path: Path) -> None:
    """The CLI finds the migrations inside the package, not relative to the working directory."""
    db = tmp_path / "cwd.db"
    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "ORCH_DB_URL": f"sqlite:///{db}", "PYTHONPATH": str(repo)}
    proc = subprocess.run(
        [sys.executable, "-c", "from orchestrator.cli.main import main; main()", "db", "upgrade"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "head" in proc.stdout
    store = Store.from_url(f"sqlite:///{db}")
    try:
        assert migrate.current_revision(store.engine) == migrate.head_revision()
    finally:
        store.close()
