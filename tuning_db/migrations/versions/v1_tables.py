"""Schema version 1: workloads, targets, runs, records and the meta facts (autotune 0.1, before Alembic).

Revision ID: v1
Revises:
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "v1"
down_revision = None
branch_labels = None
depends_on = None

KEY_LENGTH = 1024   # records.KEY_LENGTH when this revision was written, frozen as the table was


def upgrade() -> None:
    meta = op.create_table("meta", sa.Column("key", sa.String(64), primary_key=True),
                           sa.Column("value", sa.Text(), nullable=False))
    op.create_table("workloads", sa.Column("id", sa.Integer(), primary_key=True),
                    sa.Column("key", sa.String(KEY_LENGTH), nullable=False, unique=True),
                    sa.Column("op", sa.String(128), nullable=False, index=True),
                    sa.Column("params", sa.JSON(), nullable=False), sa.Column("dtype", sa.String(32), nullable=False))
    op.create_table("targets", sa.Column("id", sa.Integer(), primary_key=True),
                    sa.Column("key", sa.String(KEY_LENGTH), nullable=False, unique=True))
    op.create_table("runs", sa.Column("id", sa.Integer(), primary_key=True),
                    sa.Column("workload_id", sa.Integer(), sa.ForeignKey("workloads.id"), nullable=False, index=True),
                    sa.Column("target_id", sa.Integer(), sa.ForeignKey("targets.id"), nullable=False),
                    sa.Column("tuner", sa.String(64), nullable=False),
                    sa.Column("trials_asked", sa.Integer(), nullable=False),
                    sa.Column("trials_done", sa.Integer(), nullable=False),
                    sa.Column("seed", sa.BigInteger(), nullable=True),
                    sa.Column("started_at", sa.Float(), nullable=False),
                    sa.Column("ended_at", sa.Float(), nullable=True),
                    sa.Column("status", sa.String(16), nullable=False))
    op.create_table("records", sa.Column("id", sa.Integer(), primary_key=True),
                    sa.Column("run_id", sa.Integer(), sa.ForeignKey("runs.id"), nullable=False),
                    sa.Column("workload_id", sa.Integer(), sa.ForeignKey("workloads.id"), nullable=False),
                    sa.Column("target_id", sa.Integer(), sa.ForeignKey("targets.id"), nullable=False),
                    sa.Column("config_index", sa.BigInteger(), nullable=False),
                    sa.Column("config", sa.JSON(), nullable=False), sa.Column("costs", sa.JSON(), nullable=False),
                    sa.Column("cost", sa.Float(), nullable=True),
                    sa.Column("error_kind", sa.String(32), nullable=False),
                    sa.Column("error_msg", sa.Text(), nullable=False),
                    sa.Column("build_seconds", sa.Float(), nullable=False),
                    sa.Column("timestamp", sa.Float(), nullable=False))
    op.create_index("ix_records_best", "records", ["workload_id", "target_id", "cost"])
    op.create_index("ix_records_index", "records", ["workload_id", "target_id", "config_index"])
    op.bulk_insert(meta, [{"key": "schema_version", "value": "1"}])


def downgrade() -> None:
    for table in ("records", "runs", "targets", "workloads", "meta"):
        op.drop_table(table)
