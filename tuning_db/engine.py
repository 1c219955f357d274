"""Opening a tuning database: where it is, whether a file can be one, and engines with the
SQLite settings every connection needs (WAL, busy timeout, foreign keys, early write locks).
JSON columns are read with the bounded, never-raising reader of `boundary`."""
from __future__ import annotations

import os
import sqlite3
import stat
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sqlalchemy import URL, create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.pool import QueuePool, StaticPool

from .boundary import tolerant_loads
from .records import TuningDBError

BUSY_TIMEOUT_S = 30.0
DEFAULT_PATH = "./tuning.db"
_SQLITE_MAGIC = b"SQLite format 3\x00"
_EMPTY_POLLS, _EMPTY_POLL_S = 10, 0.05
# libpq's URL schemes, which name no driver: the one autotune installs (SQLAlchemy would pick psycopg2)
_DRIVERS = {"postgresql": "postgresql+psycopg", "postgres": "postgresql+psycopg"}
WRITE_OPTION = "tuning_db_write"   # execution option that makes the begin hook take the write lock


def locate(path_or_url: str | os.PathLike[str] | None) -> tuple[Path | None, URL | None]:
    """A SQLite file path, or else a URL (PostgreSQL, another database, in-memory SQLite, a SQLite URI)."""
    raw = os.fspath(path_or_url) if path_or_url is not None else os.environ.get("AUTOTUNE_DB") or DEFAULT_PATH
    if "://" not in raw:
        return (None, make_url("sqlite://")) if raw == ":memory:" else (Path(raw), None)
    try:
        url = make_url(raw)
    except ArgumentError as e:
        raise TuningDBError(f"cannot open tuning database {raw!r}: {e}") from None
    url = url.set(drivername=_DRIVERS.get(url.drivername, url.drivername))
    db = url.database or ""
    plain_file = db not in ("", ":memory:") and not url.query and not db.startswith("file:")
    if url.get_backend_name() == "sqlite" and plain_file:
        return Path(db), None
    return None, url


def _read_magic(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(len(_SQLITE_MAGIC))
    except OSError as e:
        raise TuningDBError(f"cannot open tuning database {path}: {e.strerror or e}") from None


def check_file(path: Path, readonly: bool) -> None:
    """Refuse what cannot be a tuning database before SQLite sees (and would rewrite) it; a FIFO
    or device is refused from its stat, since reading its first bytes could block forever."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if readonly:
            raise TuningDBError(f"tuning database {path} does not exist") from None
        parent = path.parent if str(path.parent) else Path(".")
        if not parent.is_dir():
            raise TuningDBError(f"cannot create tuning database {path}: directory {parent} "
                                "does not exist") from None
        return
    except OSError as e:
        raise TuningDBError(f"cannot open tuning database {path}: {e.strerror or e}") from None
    if stat.S_ISDIR(mode):
        raise TuningDBError(f"{path} is a directory, not a tuning database file")
    if not stat.S_ISREG(mode):
        raise TuningDBError(f"{path} is not a regular file (a tuning database is an SQLite file)")
    head = _read_magic(path)
    for _ in range(_EMPTY_POLLS):   # another process may have just created it: its header follows in ms
        if head:
            break
        time.sleep(_EMPTY_POLL_S)
        head = _read_magic(path)
    if not head:
        raise TuningDBError(f"{path} is an empty file, not a tuning database (remove it to start a new one)")
    if head != _SQLITE_MAGIC:
        raise TuningDBError(f"{path} is not a tuning database (not an SQLite file)")


def install_sqlite_hooks(engine: Engine, use_wal: Callable[[], bool]) -> None:
    """PRAGMAs on every new connection; our own BEGIN so reads are snapshots and writes lock early.

    WAL is persistent in the file, so it is switched on only once the file is known to be ours
    (`use_wal`): opening somebody else's SQLite file must leave it exactly as it was.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None   # the driver must not BEGIN on its own; _on_begin does
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")   # first: the rest may wait
        if use_wal():
            _enable_wal(cursor)                              # readers never block the writer, nor it them
            cursor.execute("PRAGMA synchronous = NORMAL")   # WAL stays consistent on a crash; fsync per checkpoint
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # IMMEDIATE takes the write lock up front (waiting up to busy_timeout), so a writer never
        # fails half-way upgrading a read snapshot that another writer made stale.
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(WRITE_OPTION) else "BEGIN")


def _enable_wal(cursor: sqlite3.Cursor) -> None:
    """Switch the file to WAL (once; later connections find it so). The switch needs an exclusive
    lock, and SQLite refuses it at once rather than wait when that could deadlock, so we retry."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            if cursor.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def sqlite_file_engine(path: Path, readonly: bool) -> Engine:
    # A SQLite URI (not a SQLAlchemy URL) so that mode=ro can neither create nor write the file.
    base = f"file:{quote(str(path.resolve()))}"
    uri = _readonly_uri(path, base) if readonly else f"{base}?mode=rwc"

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False, isolation_level=None)

    return create_engine(URL.create("sqlite", database=str(path)), creator=connect, poolclass=QueuePool,
                         json_deserializer=tolerant_loads)


# What SQLite says when a reader of a WAL file cannot make the -shm (or -wal) file it needs next to it.
_NO_SHM = ("attempt to write a readonly database", "unable to open database file")


def _readonly_uri(path: Path, base: str) -> str:
    """mode=ro, which keeps SQLite's locking; but a WAL file in a directory we cannot write (or on a
    read-only file system) cannot be read so, since SQLite cannot create its -shm. Then, if its
    -wal holds nothing, open it immutable (no locks, no -shm: the file alone is the database);
    if the -wal holds commits, reading the file alone would miss them: say so instead."""
    uri = f"{base}?mode=ro"
    try:
        probe = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_S)
        try:
            probe.execute("PRAGMA schema_version").fetchone()
        finally:
            probe.close()
        return uri
    except sqlite3.Error as e:
        if str(e) not in _NO_SHM:
            return uri                  # not this problem: opening it reports it as usual
    wal = path.with_name(path.name + "-wal")
    if wal.exists() and wal.stat().st_size > 0:
        raise TuningDBError(f"cannot read tuning database {path}: its -wal file holds commits and SQLite cannot "
                            f"create the -shm file needed to read them (is {path.parent} read-only?); open it once "
                            "with write access to that directory")
    return f"{base}?mode=ro&immutable=1"


def url_engine(url: URL, readonly: bool) -> Engine:
    """An engine for a URL; PostgreSQL readers get READ ONLY transactions, which never wait on writers."""
    if url.get_backend_name() == "postgresql":
        return create_engine(url, pool_pre_ping=True, json_deserializer=tolerant_loads,
                             execution_options={"postgresql_readonly": True} if readonly else {})
    if url.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, json_deserializer=tolerant_loads)
    if in_memory(url):   # one shared connection, or each would be its own database
        return create_engine("sqlite://", poolclass=StaticPool, json_deserializer=tolerant_loads,
                             creator=lambda: sqlite3.connect(":memory:", check_same_thread=False))
    return create_engine(url, json_deserializer=tolerant_loads)


def in_memory(url: URL) -> bool:
    return url.get_backend_name() == "sqlite" and (url.database or ":memory:") == ":memory:"
