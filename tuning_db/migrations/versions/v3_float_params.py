"""Schema version 3: no table changes; a workload's params may hold floats from here on, which
version 2 refuses as invalid, so the number keeps an older library from misreading them.

Revision ID: v3
Revises: v2
"""
from __future__ import annotations

from alembic import op

revision = "v3"
down_revision = "v2"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")


def downgrade() -> None:
    op.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
