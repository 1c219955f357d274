"""`TuningDB`: opening a tuning database safely, and every query the tuner, runtime and CLI make.

SQLite is the default store, shared by the processes of one machine: each connection gets WAL, a
busy timeout, foreign keys and synchronous=NORMAL, and every write is one `BEGIN IMMEDIATE`
transaction (a batch of records at a time), so concurrent writers queue instead of failing and a
killed writer loses at most the batch it was writing. PostgreSQL (any SQLAlchemy URL, e.g.
postgresql://user@host/db) is the store many machines share: the same one-transaction writes, run
side by side, with claims made safe for that by `tuning_db.claims`. Either way the schema is made
and upgraded by `tuning_db.migrate`. Reads get a session each, so threads may share one TuningDB,
and never wait for a writer.
"""
from __future__ import annotations

import contextlib
import importlib.metadata
import math
import os
import sqlite3
import time
import warnings
from collections.abc import Iterable, Iterator
from typing import Any, cast

from sqlalchemy import URL, CursorResult, Table, and_, case, delete, func, insert, inspect, select, union, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from .boundary import is_int, warn_skipped
from .claims import release, take
from .engine import WRITE_OPTION, check_file, in_memory, install_sqlite_hooks, locate, sqlite_file_engine, url_engine
from .jsonl import export_records, import_lines, read_jsonl
from .migrate import lock, migrate
from .records import RUN_STATUSES, Record, RunInfo, TuningDBError, WorkloadSummary, median_cost
from .rekey import Rekey, rekey
from .schema import (
    MODEL_KEY_LENGTH,
    SCHEMA_VERSION,
    VERSION_TABLES,
    Meta,
    ModelTimingRow,
    RecordRow,
    RunRow,
    TargetRow,
    WorkloadRow,
    get_or_create,
    key_id,
    record_row,
    to_record,
    workload_params,
)


def _reason(e: BaseException) -> str:
    """The driver's one-line reason, without SQLAlchemy's statement dump."""
    return str(getattr(e, "orig", None) or e).splitlines()[0]


def _library_version() -> str:
    try:
        return "autotune " + importlib.metadata.version("autotune")
    except importlib.metadata.PackageNotFoundError:
        return "autotune (unknown version)"


def _best_ok_ranked() -> Any:
    """Every ok record with its rank by cost within its (workload, target): 1 is the best."""
    rank = func.row_number().over(partition_by=(RecordRow.workload_id, RecordRow.target_id),
                                  order_by=(RecordRow.cost, RecordRow.id))
    return (select(RecordRow.id, RecordRow.workload_id, RecordRow.target_id, RecordRow.cost,
                   RecordRow.config, RecordRow.config_index, rank.label("rank"))
            .where(RecordRow.error_kind == "ok", RecordRow.cost > 0).subquery())


def _first_ok(workload_key: str, target_key: str, config_index: int) -> Any:
    """The select of a config's first ok record: the one its timings measured again go to."""
    return (select(RecordRow).where(RecordRow.workload_id == key_id(WorkloadRow, workload_key),
                                    RecordRow.target_id == key_id(TargetRow, target_key),
                                    RecordRow.config_index == int(config_index), RecordRow.error_kind == "ok")
            .order_by(RecordRow.id).limit(1))


def _seconds(costs: Iterable[float], method: str) -> list[float]:
    """`costs` as floats; ValueError naming `method` unless they are some positive finite seconds."""
    more = [float(c) for c in costs]
    if not more or not all(math.isfinite(c) and c > 0 for c in more):
        raise ValueError(f"{method}: costs must be positive finite seconds, got {more!r}")
    return more


class TuningDB:
    """The tuning database: runs and their measured records per (workload key, target key).

    path_or_url: None -> $AUTOTUNE_DB, else ./tuning.db. A plain path is a SQLite file; any
    SQLAlchemy URL is accepted. readonly=True never creates, locks for writing, or writes the
    database; every write method then raises TuningDBError. `url` says where it is (password
    masked) and `path` is the SQLite file (None for other URLs).
    """

    def __init__(self, path_or_url: str | os.PathLike[str] | None = None, readonly: bool = False) -> None:
        self.readonly = readonly
        path, url = locate(path_or_url)   # the SQLite file, or else the URL (casts below)
        self.path = path   # the SQLite file, or None for a URL that is not one
        self.name = str(path) if path is not None else cast(URL, url).render_as_string(hide_password=True)
        self.url = f"sqlite:///{path.resolve()}" if path is not None else self.name   # password masked
        if path is not None:
            check_file(path, readonly)
        try:
            self._engine = (sqlite_file_engine(path, readonly) if path is not None
                            else url_engine(cast(URL, url), readonly))
        except (SQLAlchemyError, ImportError) as e:   # unknown dialect, driver not installed
            raise TuningDBError(f"cannot open tuning database {self.name}: {e}") from None
        self._sqlite = self._engine.dialect.name == "sqlite"
        self._wal = False   # set once the schema check passes
        if self._sqlite:
            install_sqlite_hooks(self._engine, lambda: self._wal)
        self._pid = os.getpid()
        self._read = sessionmaker(self._engine, expire_on_commit=False)
        self._write = sessionmaker(self._engine.execution_options(**{WRITE_OPTION: True}), expire_on_commit=False)
        self._model_timings = True   # False for an older database read as it is (_open_schema)
        try:
            self._open_schema()
        except SQLAlchemyError as e:
            self._engine.dispose()
            raise TuningDBError(f"cannot open tuning database {self.name}: {_reason(e)}") from None
        except BaseException:
            self._engine.dispose()
            raise
        if self._sqlite and not readonly and not in_memory(self._engine.url):
            self._wal = True
            self._engine.dispose()   # the checking connection had no WAL; every later one gets it

    def __repr__(self) -> str:
        return f"TuningDB({self.name!r}{', readonly=True' if self.readonly else ''})"

    def __enter__(self) -> TuningDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._engine.dispose()

    # -- opening -----------------------------------------------------------------------------

    def _open_schema(self) -> None:
        """Create the tables in a new database, else check it is a tuning database we can read,
        upgrading an older version in place (tuning_db.migrate) when opened for writing."""
        if self.readonly:
            with self._engine.connect() as conn:
                tables = set(inspect(conn).get_table_names())
                self._check_schema(conn, tables)
            self._model_timings = "model_timings" in tables
            return
        with self._write.begin() as session:   # under the write lock: two creators cannot race
            conn = session.connection()
            lock(conn)
            tables = set(inspect(conn).get_table_names())
            known = "meta" in tables or bool(tables and self.path is not None)
            migrate(conn, tables, self._check_schema(conn, tables) if known else None, self.name)
            if not known:
                session.add_all([Meta(key="created_by", value=_library_version()),
                                 Meta(key="created_at", value=repr(time.time()))])

    def _check_schema(self, conn: Any, tables: set[str]) -> int:
        """The schema version of a tuning database this library can read; TuningDBError otherwise."""
        if "meta" not in tables:
            found = f"tables {sorted(tables)}" if tables else "no tables"
            raise TuningDBError(f"{self.name} is not a tuning database: it has {found} and no 'meta' table")
        text = conn.execute(select(Meta.value).where(Meta.key == "schema_version")).scalar()
        version = next((v for v in VERSION_TABLES if str(v) == text), None)
        if version is None:
            raise TuningDBError(f"{self.name} has tuning database schema version {text}, but this library "
                                f"reads versions 1 to {SCHEMA_VERSION}; use a matching autotune or a new database")
        if VERSION_TABLES[version] - tables:
            raise TuningDBError(f"{self.name} is a damaged tuning database: it lacks tables "
                                f"{sorted(VERSION_TABLES[version] - tables)}")
        return version

    # -- sessions ----------------------------------------------------------------------------

    def _fresh_after_fork(self) -> None:
        if os.getpid() != self._pid:   # pooled connections belong to the parent process
            self._engine.dispose(close=False)
            self._pid = os.getpid()

    @contextlib.contextmanager
    def _reading(self) -> Iterator[Session]:
        self._fresh_after_fork()
        try:
            with self._read() as session:
                yield session
        except SQLAlchemyError as e:
            raise TuningDBError(f"{self.name}: {_reason(e)}") from e

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Session]:
        """One transaction: committed when the block ends, rolled back entirely if it raises."""
        if self.readonly:
            raise TuningDBError(f"{self.name} was opened readonly; cannot write to it")
        self._fresh_after_fork()
        try:
            with self._write.begin() as session:
                yield session
        except SQLAlchemyError as e:
            raise TuningDBError(f"{self.name}: {_reason(e)}") from e

    # -- writing -----------------------------------------------------------------------------

    def start_run(self, workload_key: str, op: str, params: dict[str, Any], dtype: str, target_key: str,
                  tuner: str, trials_asked: int, seed: int | None = None) -> int:
        """Open a run (status "running") of `tuner` on a workload and target, creating them if new."""
        if not isinstance(params, dict):
            raise TypeError(f"start_run: params must be a dict, got {type(params).__name__}")
        for name, value in (("workload_key", workload_key), ("target_key", target_key)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"start_run: {name} must be a non-empty string, got {value!r}")
        with self._writing() as session:
            workload_id = get_or_create(session, WorkloadRow, workload_key, op=op, params=params, dtype=dtype)
            target_id = get_or_create(session, TargetRow, target_key)
            run = RunRow(workload_id=workload_id, target_id=target_id, tuner=tuner, trials_asked=int(trials_asked),
                         trials_done=0, seed=seed, started_at=time.time(), status="running")
            session.add(run)
            session.flush()
            return run.id

    def add_records(self, run_id: int, records: Iterable[Record]) -> None:
        """Store one batch in one transaction: all of it is kept, or (on any error) none of it."""
        records = list(records)
        with self._writing() as session:
            run = session.get(RunRow, run_id)
            if run is None:
                raise TuningDBError(f"{self.name}: no run {run_id}; start one with start_run")
            keys = (session.get_one(WorkloadRow, run.workload_id).key, session.get_one(TargetRow, run.target_id).key)
            for i, rec in enumerate(records):
                if not isinstance(rec, Record):
                    raise TypeError(f"add_records: item {i} is a {type(rec).__name__}, expected a Record")
                if (rec.workload_key, rec.target_key) != keys:
                    raise TuningDBError(f"add_records: record {i} is for {rec.workload_key!r} on {rec.target_key!r}, "
                                        f"but run {run_id} tunes {keys[0]!r} on {keys[1]!r}")
            if records:
                rows = [record_row(r, run_id, run.workload_id, run.target_id) for r in records]
                session.execute(insert(cast(Table, RecordRow.__table__)), rows)   # one executemany
                release(session, run_id, [r.config_index for r in records])

    def add_timings(self, workload_key: str, target_key: str, config_index: int, costs: Iterable[float]) -> float:
        """Add timings of a config measured again to its first ok record, whose cost becomes the
        median of all its timings; returns that cost. A config is timed once while tuning, in
        one phase of a machine whose speed drifts; timings taken again later, interleaved with
        its rivals', keep one lucky phase from deciding the best (`autotune.search.confirm`)."""
        more = _seconds(costs, "add_timings")
        stmt = _first_ok(workload_key, target_key, config_index).with_for_update()   # locked: concurrent adds queue
        with self._writing() as session:
            row = session.scalars(stmt).first()
            if row is None:
                raise TuningDBError(f"{self.name}: no ok record of config {config_index} of {workload_key!r} "
                                    f"on {target_key!r} to add timings to")
            row.costs = [*row.costs, *more]
            row.cost = median_cost("ok", row.costs)
            return cast(float, row.cost)

    def add_model_timings(self, model_key: str, workload_key: str, target_key: str, config_index: int,
                          costs: Iterable[float]) -> float:
        """Add times a config took per call inside the model `model_key` (a hash of its graph) to
        that model's timings of it, whose cost becomes the median of all of them; returns that
        cost. A config's time alone and inside a model differ, and the lowest decides which config
        the model runs (`model_choices`); only a config with an ok record (measured, its output
        checked) may be one."""
        more = _seconds(costs, "add_model_timings")
        if not isinstance(model_key, str) or not 0 < len(model_key) <= MODEL_KEY_LENGTH:
            raise ValueError(f"add_model_timings: model_key must be a non-empty string of at most "
                             f"{MODEL_KEY_LENGTH} characters, got {model_key!r}")
        index = int(config_index)
        now = time.time()
        with self._writing() as session:
            found = session.scalars(_first_ok(workload_key, target_key, index)).first()
            if found is None:
                raise TuningDBError(f"{self.name}: no ok record of config {config_index} of {workload_key!r} "
                                    f"on {target_key!r} to add in-model timings to")
            ident = {"model_key": model_key, "target_id": found.target_id, "workload_id": found.workload_id,
                     "config_index": index}
            row = session.get(ModelTimingRow, ident, with_for_update=True)   # locked: concurrent appends queue
            if row is None:
                try:
                    with session.begin_nested():   # a savepoint: losing the race below must not end the transaction
                        row = ModelTimingRow(**ident, costs=more, cost=median_cost("ok", more), updated_at=now)
                        session.add(row)
                    return row.cost
                except IntegrityError:   # another writer created the row since we looked: add to theirs
                    row = session.get_one(ModelTimingRow, ident, with_for_update=True)
            row.costs = [*row.costs, *more]
            row.cost = cast(float, median_cost("ok", row.costs))
            row.updated_at = now
            return row.cost

    def claim(self, run_id: int, indices: Iterable[int], lease_s: float) -> list[int]:
        """Claim configs for `run_id` to measure, for `lease_s` seconds: returns those of `indices`
        (in order) that no run has measured and no other run holds an unexpired claim on.

        Concurrent tuners of one task call this before measuring, so none measures a config that
        another has measured or is measuring; the claims of a run that dies expire with the lease.
        """
        indices = list(dict.fromkeys(int(i) for i in indices))
        if not (math.isfinite(lease_s) and lease_s > 0):
            raise ValueError(f"claim: lease_s must be positive seconds, got {lease_s!r}")
        now = time.time()
        with self._writing() as session:
            run = session.get(RunRow, run_id)
            if run is None:
                raise TuningDBError(f"{self.name}: no run {run_id}; start one with start_run")
            return take(session, run, indices, now, lease_s)

    def finish_run(self, run_id: int, trials_done: int, status: str = "finished") -> None:
        """Close a run with how many trials it measured and how it ended."""
        if status not in RUN_STATUSES:
            raise ValueError(f"finish_run: status must be one of {list(RUN_STATUSES)}, got {status!r}")
        with self._writing() as session:
            changed = cast(CursorResult, session.execute(update(RunRow).where(RunRow.id == run_id).values(
                trials_done=int(trials_done), status=status, ended_at=time.time()))).rowcount
            if changed == 0:
                raise TuningDBError(f"{self.name}: no run {run_id} to finish")
            release(session, run_id)   # what it did not measure is free again

    # -- reading -----------------------------------------------------------------------------

    def best(self, workload_key: str, target_key: str) -> Record | None:
        """The ok record of lowest cost (ties: the earliest), or None if there is none; the unread rows
        closed at once (on PostgreSQL a server-side cursor, else closed late with a ResourceWarning)."""
        stmt = (select(RecordRow)
                .where(RecordRow.workload_id == key_id(WorkloadRow, workload_key),
                       RecordRow.target_id == key_id(TargetRow, target_key),
                       RecordRow.cost > 0, RecordRow.error_kind == "ok")
                .order_by(RecordRow.cost, RecordRow.id).execution_options(yield_per=8))
        with self._reading() as session, session.scalars(stmt) as rows:
            return next(self._valid_records((row, workload_key, target_key) for row in rows), None)

    def records(self, workload_key: str | None = None, target_key: str | None = None, ok_only: bool = False,
                limit: int | None = None) -> list[Record]:
        """Records in the order they were stored, optionally of one workload/target, ok ones only."""
        stmt = (select(RecordRow, WorkloadRow.key, TargetRow.key)
                .join(WorkloadRow, RecordRow.workload_id == WorkloadRow.id)
                .join(TargetRow, RecordRow.target_id == TargetRow.id).order_by(RecordRow.id).limit(limit))
        if workload_key is not None:
            stmt = stmt.where(RecordRow.workload_id == key_id(WorkloadRow, workload_key))
        if target_key is not None:
            stmt = stmt.where(RecordRow.target_id == key_id(TargetRow, target_key))
        if ok_only:
            stmt = stmt.where(RecordRow.error_kind == "ok")
        with self._reading() as session:
            return list(self._valid_records(session.execute(stmt)))

    def _valid_records(self, rows: Iterable[Any]) -> Iterator[Record]:
        """The Records of (row, workload key, target key) triples, skipping invalid rows with a warning."""
        for row, wkey, tkey in rows:
            try:
                yield to_record(row, wkey, tkey)
            except ValueError as e:
                warn_skipped(self.name, f"record {row.id}", e)

    def ok_record(self, workload_key: str, target_key: str, config_index: int) -> Record | None:
        """The first ok record of one config (the one `add_timings` adds to), or None."""
        with self._reading() as session:
            rows = session.scalars(_first_ok(workload_key, target_key, config_index))
            return next(self._valid_records((row, workload_key, target_key) for row in rows), None)

    def measured_indices(self, workload_key: str, target_key: str) -> set[int]:
        """Config indices with a record of any outcome: what a resumed run need not measure again."""
        stmt = select(RecordRow.config_index).distinct().where(
            RecordRow.workload_id == key_id(WorkloadRow, workload_key),
            RecordRow.target_id == key_id(TargetRow, target_key))
        with self._reading() as session:
            return set(session.scalars(stmt))

    def model_choices(self, model_key: str, target_key: str) -> dict[str, int]:
        """The config each workload timed inside the model `model_key` on a target runs there: the
        one of lowest in-model cost (ties: the lower index), by workload key. Empty when nothing
        was timed, and for a database from before in-model timings, read as it is."""
        if not self._model_timings:
            return {}
        stmt = (select(WorkloadRow.key, ModelTimingRow.config_index)
                .join(WorkloadRow, ModelTimingRow.workload_id == WorkloadRow.id)
                .where(ModelTimingRow.model_key == model_key,
                       ModelTimingRow.target_id == key_id(TargetRow, target_key), ModelTimingRow.cost > 0)
                .order_by(ModelTimingRow.cost, ModelTimingRow.config_index))
        choices: dict[str, int] = {}
        with self._reading() as session:
            for workload_key, index in session.execute(stmt):
                choices.setdefault(workload_key, index)
        return choices

    def workloads(self, op: str | None = None) -> list[WorkloadSummary]:
        """One summary per (workload, target) with a run, sorted by workload key then target key."""
        pairs = select(RunRow.workload_id, RunRow.target_id).distinct().subquery()
        counts = (select(RecordRow.workload_id, RecordRow.target_id, func.count().label("trials"),
                         func.sum(case((RecordRow.error_kind != "ok", 1), else_=0)).label("errors"),
                         func.max(RecordRow.timestamp).label("last"))
                  .group_by(RecordRow.workload_id, RecordRow.target_id).subquery())
        ranked = _best_ok_ranked()
        best = select(ranked).where(ranked.c.rank == 1).subquery()

        def on(sub: Any) -> Any:
            return and_(sub.c.workload_id == pairs.c.workload_id, sub.c.target_id == pairs.c.target_id)

        stmt = (select(WorkloadRow, TargetRow.key, counts.c.trials, counts.c.errors, counts.c.last,
                       best.c.cost, best.c.config, best.c.config_index)
                .select_from(pairs).join(WorkloadRow, WorkloadRow.id == pairs.c.workload_id)
                .join(TargetRow, TargetRow.id == pairs.c.target_id)
                .outerjoin(counts, on(counts)).outerjoin(best, on(best)).order_by(WorkloadRow.key, TargetRow.key))
        if op is not None:
            stmt = stmt.where(WorkloadRow.op == op)
        with self._reading() as session:
            rows = list(session.execute(stmt))
        return [summary for summary in map(self._summary, rows) if summary is not None]

    def _summary(self, row: Any) -> WorkloadSummary | None:
        """A WorkloadSummary of one workloads() row; None (with a warning) if its workload is invalid.
        If the best row found by SQL is itself invalid, the best valid record is looked up instead."""
        w, tkey, trials, errors, last, cost, config, index = row
        try:
            params = workload_params(w)
        except ValueError as e:
            warn_skipped(self.name, f"workload {w.key!r}", e)
            return None
        if cost is not None and not (isinstance(config, dict) and math.isfinite(cost)):
            best = self.best(w.key, tkey)
            cost, config, index = (best.cost, best.config, best.config_index) if best else (None, None, None)
        return WorkloadSummary(w.key, w.op, params, w.dtype, tkey, int(trials or 0), int(errors or 0),
                               cost, config, index, last)

    def runs(self, workload_key: str | None = None) -> list[RunInfo]:
        """Every run (or those of one workload) in the order they started."""
        stmt = (select(RunRow, WorkloadRow.key, TargetRow.key)
                .join(WorkloadRow, RunRow.workload_id == WorkloadRow.id)
                .join(TargetRow, RunRow.target_id == TargetRow.id).order_by(RunRow.id))
        if workload_key is not None:
            stmt = stmt.where(WorkloadRow.key == workload_key)
        with self._reading() as session:
            return [RunInfo(r.id, wkey, tkey, r.tuner, r.trials_asked, r.trials_done, r.seed, r.started_at,
                            r.ended_at, r.status) for r, wkey, tkey in session.execute(stmt)]

    # -- exchange and maintenance ------------------------------------------------------------

    def export_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write every record, its workload and target inline, one JSON object per line."""
        with self._reading() as session:
            return export_records(session, path, self.name)

    def import_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Add the records of a JSONL file, all or nothing; records already present are skipped.

        A record is already present when its workload, target, config_index and timestamp match
        one stored. Each (workload, target) gets one run with tuner "import". Returns the count added.
        """
        if self.readonly:
            raise TuningDBError(f"{self.name} was opened readonly; cannot import into it")
        lines = read_jsonl(path)   # every line validated before the transaction starts
        with self._writing() as session:
            return import_lines(session, lines)

    def rekey_workloads(self, new_key: Rekey) -> int:
        """Rename stored workloads: `new_key(op, params, dtype)` gives a workload's (key, params) as
        the client writes them now, or None to keep it. One transaction; a workload renamed to a key
        stored already is merged into it (see `tuning_db.rekey`). Returns the count renamed."""
        with self._writing() as session:
            return rekey(session, new_key)

    def compact(self, top_k: int = 10) -> int:
        """Keep the top_k best ok records per (workload, target), the ok records of configs timed
        inside a model (a model may run one of them) and every run; delete the rest.

        Returns the number of records deleted. The SQLite file is then VACUUMed to give the space back.
        """
        if not is_int(top_k) or top_k < 1:
            raise ValueError(f"compact: top_k must be an integer in [1, 2**63 - 1], got {top_k!r}")
        ranked = _best_ok_ranked()
        timed = select(ModelTimingRow.config_index).where(ModelTimingRow.workload_id == RecordRow.workload_id,
                                                           ModelTimingRow.target_id == RecordRow.target_id,
                                                           ModelTimingRow.config_index == RecordRow.config_index)
        keep = union(select(ranked.c.id).where(ranked.c.rank <= top_k),
                     select(RecordRow.id).where(RecordRow.error_kind == "ok", timed.exists()))
        with self._writing() as session:
            deleted = cast(CursorResult, session.execute(delete(RecordRow).where(RecordRow.id.not_in(keep)),
                                      execution_options={"synchronize_session": False})).rowcount
        if self._sqlite and deleted:
            self._vacuum()
        return deleted

    def _vacuum(self) -> None:
        """Shrink the file; best effort, since the deletion it follows is already committed."""
        raw = self._engine.raw_connection()
        try:
            cursor = raw.cursor()
            cursor.execute("VACUUM")   # outside any transaction: the driver is in autocommit mode
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            cursor.close()
        except sqlite3.Error as e:
            warnings.warn(f"tuning_db: VACUUM of {self.name} failed ({e}); records were deleted but the file "
                          f"keeps its size until the next compact", stacklevel=3)
        finally:
            raw.close()
