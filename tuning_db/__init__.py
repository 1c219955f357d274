"""The tuning database (SQLite through SQLAlchemy); filled by the tuning engine."""
