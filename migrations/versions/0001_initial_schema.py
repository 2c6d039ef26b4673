"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:

    op.create_table(
        "builds",
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("sha256", name=op.f("pk_builds")),
    )
    op.create_table(
        "hosts",
        sa.Column("name", sa.String(length=255), nullable=False),
        sa.Column("address", sa.String(length=255), nullable=True),
        sa.Column("group_name", sa.String(length=255), nullable=True),
        sa.Column("labels", sa.JSON(), nullable=False),
        sa.Column("facts", sa.JSON(), nullable=True),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_hosts")),
    )
    with op.batch_alter_table("hosts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_hosts_group_name"), ["group_name"], unique=False)

    op.create_table(
        "runs",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("suite", sa.String(length=128), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("preset", sa.String(length=128), nullable=True),
        sa.Column("label", sa.String(length=255), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("started_by", sa.String(length=255), nullable=False),
        sa.Column("started_on", sa.String(length=255), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("info", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_runs_label"), ["label"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_started_at"), ["started_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_status"), ["status"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_suite"), ["suite"], unique=False)

    op.create_table(
        "host_runs",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("facts", sa.JSON(), nullable=True),
        sa.Column("agent_version", sa.String(length=128), nullable=True),
        sa.Column("build_sha", sa.String(length=64), nullable=True),
        sa.Column("last_seq", sa.Integer(), nullable=False),
        sa.Column("results", sa.Integer(), nullable=False),
        sa.Column("errors", sa.Integer(), nullable=False),
        sa.Column("cases_total", sa.Integer(), nullable=True),
        sa.Column("done_counts", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("log", sa.Text(), nullable=True),
        sa.Column("info", sa.JSON(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["host"], ["hosts.name"], name=op.f("fk_host_runs_host_hosts")),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_host_runs_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_host_runs")),
        sa.UniqueConstraint("run_id", "host", name=op.f("uq_host_runs_run_id_host")),
    )
    with op.batch_alter_table("host_runs", schema=None) as batch_op:
        batch_op.create_index("ix_host_runs_host_run_id", ["host", "run_id"], unique=False)

    op.create_table(
        "results",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("run_id", sa.String(length=36), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("case_index", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("case_params", sa.JSON(), nullable=False),
        sa.Column("case_key", sa.String(length=32), nullable=False),
        sa.Column("m", sa.BigInteger(), nullable=True),
        sa.Column("concurrency", sa.Integer(), nullable=True),
        sa.Column("size_bytes", sa.BigInteger(), nullable=True),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("info", sa.JSON(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("ts", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_results_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_results")),
        sa.UniqueConstraint("run_id", "host", "seq", name=op.f("uq_results_run_id_host_seq")),
    )
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.create_index("ix_results_host_m", ["host", "m"], unique=False)
        batch_op.create_index("ix_results_run_id_case_key", ["run_id", "case_key"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.drop_index("ix_results_run_id_case_key")
        batch_op.drop_index("ix_results_host_m")

    op.drop_table("results")
    with op.batch_alter_table("host_runs", schema=None) as batch_op:
        batch_op.drop_index("ix_host_runs_host_run_id")

    op.drop_table("host_runs")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_suite"))
        batch_op.drop_index(batch_op.f("ix_runs_status"))
        batch_op.drop_index(batch_op.f("ix_runs_started_at"))
        batch_op.drop_index(batch_op.f("ix_runs_label"))

    op.drop_table("runs")
    with op.batch_alter_table("hosts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_hosts_group_name"))

    op.drop_table("hosts")
    op.drop_table("builds")
