"""results.samples: raw samples out of results.metrics

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29

Revision 0001 kept each metric's raw samples inside ``results.metrics`` (``{"time_ms": {"median": ..,
"samples": [..]}}``), so every /series and /compare read parsed them (~60% of the document). From 0002 on,
``metrics`` keeps value, unit and the statistics, and ``samples`` holds ``{metric: [samples]}`` (NULL when the
result had none). Upgrade moves existing samples over; downgrade puts them back; no row or sample is lost.
On PostgreSQL ``metrics`` also becomes ``jsonb`` (read by key without re-parsing; SQLite keeps JSON text).

Rows are moved in id order, ``BATCH_ROWS`` at a time (keyset), with the JSON decoded and encoded by
SQLAlchemy so the same code runs on SQLite and PostgreSQL; on 1,000,000 rows this takes minutes, once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH_ROWS = 5_000

# The table as this revision knows it (not today's models, which may move on).
_results = sa.table(
    "results",
    sa.column("id", sa.BigInteger()),
    sa.column("metrics", sa.JSON()),
    sa.column("samples", sa.JSON(none_as_null=True)),
)


def upgrade() -> None:
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.add_column(sa.Column("samples", sa.JSON(), nullable=True))
    # LIKE on the text finds the rows that have samples without decoding the others (error rows, metrics
    # reported without samples).
    has_samples = sa.cast(_results.c.metrics, sa.Text).like('%"samples"%')
    _rewrite(has_samples, _split)
    if op.get_bind().dialect.name == "postgresql":  # after the rewrite, which shrank the documents
        op.alter_column("results", "metrics", type_=postgresql.JSONB(), postgresql_using="metrics::jsonb")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("results", "metrics", type_=sa.JSON(), postgresql_using="metrics::json")
    _rewrite(_results.c.samples.is_not(None), _join)
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.drop_column("samples")


def _split(metrics: dict[str, Any], samples: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """0001 → 0002: ``{"m": {.., "samples": [..]}}`` → ``({"m": {..}}, {"m": [..]})``."""
    moved: dict[str, Any] = dict(samples or {})
    out: dict[str, Any] = {}
    for name, m in metrics.items():
        if isinstance(m, dict) and "samples" in m:
            m = dict(m)
            moved[name] = m.pop("samples")
        out[name] = m
    return out, moved or None


def _join(metrics: dict[str, Any], samples: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """0002 → 0001: the inverse of ``_split``."""
    out = dict(metrics)
    for name, values in (samples or {}).items():
        m = out.get(name)
        out[name] = {**m, "samples": values} if isinstance(m, dict) else {"samples": values}
    return out, None


def _rewrite(
    where: sa.ColumnElement[bool],
    fn: Callable[[dict[str, Any], dict[str, Any] | None], tuple[dict[str, Any], dict[str, Any] | None]],
) -> None:
    conn = op.get_bind()
    stmt = (
        sa.update(_results)
        .where(_results.c.id == sa.bindparam("row_id"))
        .values(metrics=sa.bindparam("new_metrics"), samples=sa.bindparam("new_samples"))
    )
    for rows in _batches(conn, where):
        params = []
        for row_id, metrics, samples in rows:
            new_metrics, new_samples = fn(metrics or {}, samples)
            params.append({"row_id": row_id, "new_metrics": new_metrics, "new_samples": new_samples})
        conn.execute(stmt, params)


def _batches(conn: sa.Connection, where: sa.ColumnElement[bool]) -> Iterator[list[tuple[Any, ...]]]:
    last = -1
    while True:
        rows = [
            tuple(r)
            for r in conn.execute(
                sa.select(_results.c.id, _results.c.metrics, _results.c.samples)
                .where(_results.c.id > last, where)
                .order_by(_results.c.id)
                .limit(BATCH_ROWS)
            )
        ]
        if not rows:
            return
        yield rows
        last = rows[-1][0]
