"""Alembic's entry point, run by `tuning_db.migrate` on a connection it has already locked and
begun a transaction on; so there is no alembic.ini and no engine here."""
from __future__ import annotations

from alembic import context

from tuning_db.migrate import VERSION_TABLE

context.configure(connection=context.config.attributes["connection"], version_table=VERSION_TABLE)
with context.begin_transaction():   # a no-op inside the caller's transaction: its commit is ours
    context.run_migrations()
