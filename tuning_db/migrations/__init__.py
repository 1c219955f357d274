"""The schema history of the tuning database as Alembic revisions (versions/), applied by
`tuning_db.migrate`; one history for SQLite and PostgreSQL."""
