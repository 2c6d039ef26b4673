"""projections: orch project's stored predictions

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

One row per ``orch project`` call: the source moe-sweep run, the optional overheads and check runs, the source
and target GPU keys, the weight format, the parameters (layers, roof, per-layer counts), every input figure and
the per-M rows (``rows`` = ``{"projected": [...], "checked": [...]}``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "projections",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source_run_id", sa.String(length=36), nullable=False),
        sa.Column("overheads_run_id", sa.String(length=36), nullable=True),
        sa.Column("check_run_id", sa.String(length=36), nullable=True),
        sa.Column("source_gpu", sa.String(length=64), nullable=False),
        sa.Column("target_gpu", sa.String(length=64), nullable=False),
        sa.Column("dtype", sa.String(length=32), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("rows", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_projections")),
    )
    with op.batch_alter_table("projections", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_projections_created_at"), ["created_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_projections_source_run_id"), ["source_run_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_projections_target_gpu"), ["target_gpu"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("projections", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_projections_target_gpu"))
        batch_op.drop_index(batch_op.f("ix_projections_source_run_id"))
        batch_op.drop_index(batch_op.f("ix_projections_created_at"))
    op.drop_table("projections")
