"""Schema version 2: claims, the leases concurrent tuners take on the configs they measure.

Revision ID: v2
Revises: v1
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "v2"
down_revision = "v1"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("claims",
                    sa.Column("workload_id", sa.Integer(), sa.ForeignKey("workloads.id"), primary_key=True),
                    sa.Column("target_id", sa.Integer(), sa.ForeignKey("targets.id"), primary_key=True),
                    sa.Column("config_index", sa.BigInteger(), primary_key=True, autoincrement=False),
                    sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), nullable=False, index=True),
                    sa.Column("expires_at", sa.Float(), nullable=False))
    op.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")


def downgrade() -> None:
    op.drop_table("claims")
    op.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
