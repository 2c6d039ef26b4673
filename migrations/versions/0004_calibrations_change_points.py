"""calibrations and change_points: issue 16's A/A noise floor and change points over a metric's history

Revision ID: i16stats
Revises: 0003
Create Date: 2026-11-30

``calibrations``: one row per (suite, host, case_key, metric) from ``orch calibrate``: the run-to-run spread of
identical runs (``aa_spread``) and the within-run spread (``within_spread``), the runs and their medians.
``change_points``: one row per change found in a (suite, host, case_key, metric) series by ``orch runs changes``
(``run_id``: the first run after the change), so the dashboard can mark them.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "i16stats"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "calibrations",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("suite", sa.String(length=128), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("case_key", sa.String(length=32), nullable=False),
        sa.Column("metric", sa.String(length=64), nullable=False),
        sa.Column("case_params", sa.JSON(), nullable=False),
        sa.Column("aa_spread", sa.Float(), nullable=True),
        sa.Column("within_spread", sa.Float(), nullable=True),
        sa.Column("n_runs", sa.Integer(), nullable=False),
        sa.Column("runs", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_calibrations")),
        sa.UniqueConstraint(
            "suite", "host", "case_key", "metric", name=op.f("uq_calibrations_suite_host_case_key_metric")
        ),
    )
    op.create_table(
        "change_points",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("suite", sa.String(length=128), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("case_key", sa.String(length=32), nullable=False),
        sa.Column("metric", sa.String(length=64), nullable=False),
        sa.Column("case_params", sa.JSON(), nullable=False),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("run_started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("before", sa.Float(), nullable=False),
        sa.Column("after", sa.Float(), nullable=False),
        sa.Column("change", sa.Float(), nullable=True),
        sa.Column("p_value", sa.Float(), nullable=True),
        sa.Column("detected_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_change_points_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_change_points")),
        sa.UniqueConstraint(
            "suite", "host", "case_key", "metric", "run_id",
            name=op.f("uq_change_points_suite_host_case_key_metric_run_id"),
        ),
    )
    op.create_index("ix_change_points_suite_metric", "change_points", ["suite", "metric"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_change_points_suite_metric", table_name="change_points")
    op.drop_table("change_points")
    op.drop_table("calibrations")
