"""The schema goes through the Alembic history on SQLite and PostgreSQL alike: the migrations make
exactly the ORM's tables, a database made before Alembic (any schema version) is stamped and
upgraded by a writer and read as it is by a reader, and a revision from a newer library is refused
for writing but still read."""
from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from tuning_db import SCHEMA_VERSION, TuningDB, TuningDBError
from tuning_db.migrate import HEAD, VERSION_TABLE, alembic_config
from tuning_db.schema import Base

sys.path.insert(0, str(Path(__file__).parent))
from tuning_db_workers import TARGET, WORKLOAD, record  # noqa: E402

LEGACY = Path(__file__).parent / "fixtures" / "legacy_v2.sql"   # a file autotune wrote before Alembic


def engine_of(location: str):
    return create_engine(location if "://" in location else f"sqlite:///{location}")


def facts(location: str) -> tuple[str | None, str, set[str]]:
    """(Alembic revision or None, meta schema_version, tables) of the database at `location`."""
    engine = engine_of(location)
    with engine.connect() as conn:
        tables = set(inspect(conn).get_table_names())
        rev = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar() if VERSION_TABLE in tables \
            else None
        version = conn.execute(text("SELECT value FROM meta WHERE key = 'schema_version'")).scalar()
    engine.dispose()
    return rev, version, tables


def filled(location: str) -> TuningDB:
    db = TuningDB(location)
    run_id = db.start_run(WORKLOAD, "matmul", {"M": 7, "N": 11, "K": 13}, "float32", TARGET, "random", 8, 1)
    db.add_records(run_id, [record(3), record(4)])
    db.finish_run(run_id, 2)
    return db


def test_the_migrations_make_the_orm_schema(location):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    TuningDB(location).close()
    engine = engine_of(location)
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}), Base.metadata) == []
        assert ScriptDirectory.from_config(alembic_config(conn)).get_heads() == [HEAD]
    engine.dispose()
    assert facts(location)[:2] == (HEAD, str(SCHEMA_VERSION))


def as_before_alembic(location: str, version: int) -> None:
    """Make a current database what autotune wrote at schema `version`, before it used Alembic."""
    engine = engine_of(location)
    with engine.begin() as conn:
        conn.execute(text(f"DROP TABLE {VERSION_TABLE}"))
        conn.execute(text("DROP TABLE model_timings"))   # came with Alembic revision v4
        if version < 2:
            conn.execute(text("DROP TABLE claims"))
        conn.execute(text("UPDATE meta SET value = :v WHERE key = 'schema_version'"), {"v": str(version)})
    engine.dispose()


@pytest.mark.parametrize("version", [1, 2, 3])
def test_a_database_from_before_alembic_is_read_as_is_and_upgraded_by_a_writer(location, version):
    filled(location).close()
    as_before_alembic(location, version)
    before = facts(location)
    with TuningDB(location, readonly=True) as reader:
        assert [r.config_index for r in reader.records()] == [3, 4]
    assert facts(location) == before                                   # a reader changes nothing
    with TuningDB(location) as writer:
        assert [r.config_index for r in writer.records()] == [3, 4]
        run_id = writer.start_run(WORKLOAD, "matmul", {"M": 7, "N": 11, "K": 13}, "float32", TARGET, "grid", 8)
        assert writer.claim(run_id, [3, 5], lease_s=60) == [5]
    rev, meta_version, tables = facts(location)
    assert (rev, meta_version) == (HEAD, str(SCHEMA_VERSION)) and {"claims", "model_timings"} <= tables


def test_a_version_3_database_lacks_model_timings_until_a_writer_upgrades_it(location):
    """Model timings came without a new schema version: a reader takes a version 3 database
    without the table as it is (no in-model choices, records as ever), a writer adds the table."""
    from alembic import command

    filled(location).close()
    engine = engine_of(location)
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "v3")
    engine.dispose()
    before = facts(location)
    assert before[:2] == ("v3", "3") and "model_timings" not in before[2]
    with TuningDB(location, readonly=True) as reader:
        assert reader.model_choices("m" * 64, TARGET) == {}
        assert [r.config_index for r in reader.records()] == [3, 4]
        assert reader.best(WORKLOAD, TARGET) is not None
    assert facts(location) == before
    with TuningDB(location) as writer:
        writer.add_model_timings("m" * 64, WORKLOAD, TARGET, 4, [1e-3])
        assert writer.model_choices("m" * 64, TARGET) == {WORKLOAD: 4}
    rev, version, tables = facts(location)
    assert (rev, version, "model_timings" in tables) == ("v4", str(SCHEMA_VERSION), True) and SCHEMA_VERSION == 3
    with TuningDB(location, readonly=True) as reader:
        assert reader.model_choices("m" * 64, TARGET) == {WORKLOAD: 4}


def test_a_file_written_before_alembic_gets_exactly_todays_schema(tmp_path):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    path = tmp_path / "legacy.db"
    with sqlite3.connect(path) as raw:
        raw.executescript(LEGACY.read_text())
    raw.close()
    with TuningDB(path, readonly=True) as reader:
        count = len(reader.records())
    TuningDB(path).close()
    assert facts(str(path))[:2] == (HEAD, str(SCHEMA_VERSION))
    engine = engine_of(str(path))
    with engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE}), Base.metadata) == []
    engine.dispose()
    with TuningDB(path, readonly=True) as reader:
        assert len(reader.records()) == count > 0


def test_a_revision_from_a_newer_library_is_read_but_not_written(location):
    filled(location).close()
    engine = engine_of(location)
    with engine.begin() as conn:
        conn.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = 'v99_from_the_future'"))
    engine.dispose()
    with pytest.raises(TuningDBError, match="revision v99_from_the_future, which this library does not know"):
        TuningDB(location)
    with TuningDB(location, readonly=True) as reader:
        assert len(reader.records()) == 2


def test_a_downgraded_database_is_upgraded_again_by_a_writer(location):
    from alembic import command

    filled(location).close()
    engine = engine_of(location)
    with engine.begin() as conn:
        command.downgrade(alembic_config(conn), "v1")
    engine.dispose()
    rev, version, tables = facts(location)
    assert (rev, version, "claims" in tables) == ("v1", "1", False)
    with TuningDB(location) as writer:
        assert [r.config_index for r in writer.records()] == [3, 4]
    assert facts(location)[:2] == (HEAD, str(SCHEMA_VERSION))


def test_another_apps_alembic_history_in_a_shared_database_is_left_alone(pg_url):
    engine = engine_of(pg_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE alembic_version (version_num VARCHAR(32) PRIMARY KEY)"))
        conn.execute(text("INSERT INTO alembic_version VALUES ('their_head')"))
    filled(pg_url).close()
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == "their_head"
    engine.dispose()
    assert facts(pg_url)[:2] == (HEAD, str(SCHEMA_VERSION))
