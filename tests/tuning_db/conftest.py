"""Fixtures for running the database tests on SQLite and on a real PostgreSQL server, which this
test session starts (tuning_db.testing_pg) on first use and stops at its end; each test gets a
new empty database on it. Without server binaries or psycopg the PostgreSQL cases are skipped,
saying why."""
from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tuning_db import TuningDB

_names = itertools.count()


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("PostgreSQL tests need psycopg (pip install 'psycopg[binary]')")
    from tuning_db.testing_pg import PostgresServer, PostgresUnavailable

    try:
        server = PostgresServer({"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"})
    except PostgresUnavailable as e:
        pytest.skip(f"no PostgreSQL server for these tests: {e}")
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server) -> str:
    """The URL of a new, empty database on the session's server."""
    return pg_server.create_database(f"test_{next(_names)}")


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path: Path) -> str:
    """Where a new tuning database goes: a SQLite file, or a new PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "tuning.db")
    return request.getfixturevalue("pg_url")


@pytest.fixture
def db(location: str):
    """A new tuning database at `location`, closed after the test."""
    database = TuningDB(location)
    yield database
    database.close()
