"""One Alembic revision per schema change, oldest first (v1, v2, ...)."""
