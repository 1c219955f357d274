"""Bringing a database's tables to this library's schema through the Alembic history in
tuning_db/migrations, one process at a time.

Every writer calls `migrate` when it opens a database, inside the transaction that `lock` began:
on PostgreSQL a transaction-scoped advisory lock (two tuners creating the tables of one fresh
database at once would otherwise race in the catalog), on SQLite the write lock BEGIN IMMEDIATE
took. A database made before Alembic (a `meta` table with a schema version, no version table) is
stamped with the revision of its version and upgraded from there.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import text

from .records import TuningDBError

HEAD = "v4"   # the newest revision in migrations/versions (a test checks the two agree)
VERSION_TABLE = "tuning_db_alembic_version"   # not alembic_version: a shared database may have another app's
REVISION_OF_VERSION = {1: "v1", 2: "v2", 3: "v3"}   # the revision each pre-Alembic schema version is
LOCK_KEY = 0x6175746F74756E65   # "autotune": one bigint advisory-lock key for schema changes
_SCRIPTS = Path(__file__).with_name("migrations")


def lock(conn: Any) -> None:
    """Hold the schema lock until the transaction on `conn` ends (SQLite's is already held)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": LOCK_KEY})


def revision(conn: Any, tables: set[str]) -> str | None:
    """The database's Alembic revision, or None if it has no version table."""
    if VERSION_TABLE not in tables:
        return None
    return conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()


def alembic_config(conn: Any) -> Any:
    """Alembic's configuration for running our history on `conn` (in place of an alembic.ini)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    config.attributes["connection"] = conn
    return config


def migrate(conn: Any, tables: set[str], version: int | None, name: str) -> None:
    """Upgrade to HEAD: a new database (`version` None) from nothing, a pre-Alembic one from the
    revision of its schema `version`; a database at a revision this library does not know
    (written by a newer autotune) is refused rather than written."""
    current = revision(conn, tables)
    if current == HEAD:
        return
    from alembic import command
    from alembic.script import ScriptDirectory

    config = alembic_config(conn)
    known = {script.revision for script in ScriptDirectory.from_config(config).walk_revisions()}
    if current is not None and current not in known:
        raise TuningDBError(f"{name} has tuning database schema revision {current}, which this library does not "
                            f"know (its newest is {HEAD}): a newer autotune wrote it; write to it with that one")
    if current is None and version is not None:
        command.stamp(config, REVISION_OF_VERSION[version])
    command.upgrade(config, "head")
