"""model_timings: the times configs took inside whole models, which decide the configs a model runs.

No new schema version: an older library reading a database with this table loses only the
in-model choice (it runs each workload's best record), and its writers already refuse a
revision they do not know.

Revision ID: v4
Revises: v3
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "v4"
down_revision = "v3"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("model_timings",
                    sa.Column("model_key", sa.String(64), nullable=False),
                    sa.Column("workload_id", sa.Integer(), sa.ForeignKey("workloads.id"), nullable=False),
                    sa.Column("target_id", sa.Integer(), sa.ForeignKey("targets.id"), nullable=False),
                    sa.Column("config_index", sa.BigInteger(), nullable=False, autoincrement=False),
                    sa.Column("costs", sa.JSON(), nullable=False),
                    sa.Column("cost", sa.Float(), nullable=False),
                    sa.Column("updated_at", sa.Float(), nullable=False),
                    sa.PrimaryKeyConstraint("model_key", "target_id", "workload_id", "config_index"))


def downgrade() -> None:
    op.drop_table("model_timings")
