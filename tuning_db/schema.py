"""The tables of the tuning database (SQLAlchemy 2.x ORM), the schema version they make, and
how a `Record` maps onto a row.

Change a table or what a column may hold: add an Alembic revision in migrations/versions (the
one schema history of SQLite and PostgreSQL databases, applied by `tuning_db.migrate` when a
writer opens a database) and, if an older library must not read the result, bump SCHEMA_VERSION
(kept in the meta table, which every autotune reads) in that revision: a newer database is then
refused on open rather than misread, and readers read an older one as it is. Every JSON column
holds plain JSON (dicts, lists, numbers); nothing is pickled.
Times are float unix seconds, like the measurement timestamps they sit beside.
"""
from __future__ import annotations

from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Float,
    ForeignKey,
    Index,
    Integer,
    PrimaryKeyConstraint,
    String,
    Text,
    select,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

from .boundary import check_params
from .records import KEY_LENGTH, Record, TuningDBError

SCHEMA_VERSION = 3
MODEL_KEY_LENGTH = 64   # a hash of a model's graph


class Base(DeclarativeBase):
    pass


class Meta(Base):
    """Key/value facts about the file: schema_version, created_by (library version), created_at."""

    __tablename__ = "meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class WorkloadRow(Base):
    """What is computed: `key` is the canonical string, op/params/dtype its parts for queries."""

    __tablename__ = "workloads"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(KEY_LENGTH), unique=True)
    op: Mapped[str] = mapped_column(String(128), index=True)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    dtype: Mapped[str] = mapped_column(String(32))


class TargetRow(Base):
    """Where it runs: the target key string (ISA, CPU, features, cores or CUDA arch)."""

    __tablename__ = "targets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(KEY_LENGTH), unique=True)


class RunRow(Base):
    """One tuning session; `status` is "running" until finish_run (so a killed run stays "running")."""

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"), index=True)
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"))
    tuner: Mapped[str] = mapped_column(String(64))
    trials_asked: Mapped[int] = mapped_column(Integer)
    trials_done: Mapped[int] = mapped_column(Integer, default=0)
    seed: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    started_at: Mapped[float] = mapped_column(Float)
    ended_at: Mapped[float | None] = mapped_column(Float, nullable=True)
    status: Mapped[str] = mapped_column(String(16))


class RecordRow(Base):
    """One measurement. `cost` is the median of `costs` for ok records and NULL otherwise, stored
    so that the best record of a (workload, target) is one walk down ix_records_best."""

    __tablename__ = "records"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"))
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"))
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"))
    config_index: Mapped[int] = mapped_column(BigInteger)   # mixed-radix spaces can pass 2**31
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    costs: Mapped[list[float]] = mapped_column(JSON)
    cost: Mapped[float | None] = mapped_column(Float, nullable=True)
    error_kind: Mapped[str] = mapped_column(String(32))
    error_msg: Mapped[str] = mapped_column(Text, default="")
    build_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    timestamp: Mapped[float] = mapped_column(Float)

    __table_args__ = (
        Index("ix_records_best", "workload_id", "target_id", "cost"),
        Index("ix_records_index", "workload_id", "target_id", "config_index"),
    )


class ClaimRow(Base):
    """A config that one run is measuring now: other runs skip it. The claim is a lease: a run
    that dies leaves it behind, and once `expires_at` passes the config may be claimed again."""

    __tablename__ = "claims"

    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"), primary_key=True)
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), primary_key=True)
    config_index: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    expires_at: Mapped[float] = mapped_column(Float)


class ModelTimingRow(Base):
    """The times a config took per call inside one model (`model_key`, a hash of its graph),
    measured by profiling the compiled model. A config's time alone (a record's cost) and inside
    a model differ, since its neighbours leave the caches and the machine in another state, so
    the configs a model runs are those fastest inside it. `cost` is the median of `costs`."""

    __tablename__ = "model_timings"

    model_key: Mapped[str] = mapped_column(String(MODEL_KEY_LENGTH))
    workload_id: Mapped[int] = mapped_column(ForeignKey("workloads.id"))
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"))
    config_index: Mapped[int] = mapped_column(BigInteger)
    costs: Mapped[list[float]] = mapped_column(JSON)
    cost: Mapped[float] = mapped_column(Float)
    updated_at: Mapped[float] = mapped_column(Float)

    # target before workload: the key's index is also the one for a model's choices on a target
    __table_args__ = (PrimaryKeyConstraint("model_key", "target_id", "workload_id", "config_index"),)


TABLES = frozenset(Base.metadata.tables)
# The tables each version has (for the damage check of a database opened as it is). Version 3
# changes no table (see migrations/versions/v3_float_params.py), and model_timings came after it
# without a new version (see v4_model_timings.py): a version 3 database may lack it.
VERSION_TABLES = {1: TABLES - {"claims", "model_timings"}, 2: TABLES - {"model_timings"},
                  3: TABLES - {"model_timings"}}


def record_row(record: Record, run_id: int, workload_id: int, target_id: int) -> dict[str, Any]:
    """The records-table row of a Record; `cost` is derived from it, never given separately."""
    return {"run_id": run_id, "workload_id": workload_id, "target_id": target_id,
            "config_index": record.config_index, "config": record.config, "costs": list(record.costs),
            "cost": record.cost, "error_kind": record.error_kind, "error_msg": record.error_msg,
            "build_seconds": record.build_seconds, "timestamp": record.timestamp}


def to_record(row: RecordRow, workload_key: str, target_key: str) -> Record:
    """The Record of a row; ValueError naming the field if the stored row is not a valid record."""
    # the stored costs may be any JSON value: Record checks them and makes them a tuple
    return Record(workload_key, target_key, row.config_index, row.config, cast(Any, row.costs), row.error_kind,
                  row.error_msg, row.build_seconds, row.timestamp, row.run_id)


def workload_params(row: WorkloadRow) -> dict[str, Any]:
    """The stored shape parameters of a workload; ValueError if they are not a task's kinds."""
    return check_params(row.params, "params")


def key_id(model: type[WorkloadRow] | type[TargetRow], key: str) -> Any:
    """The id of a key as a scalar subquery, so an equality on it can use the records indexes."""
    return select(model.id).where(model.key == key).scalar_subquery()


def get_or_create(session: Session, model: type[WorkloadRow] | type[TargetRow], key: str, **fields: Any) -> int:
    """The id of `key`, inserting the row if new; a concurrent insert of the same key is read back."""
    for _ in range(3):
        found = session.scalar(select(model.id).where(model.key == key))
        if found is not None:
            return found
        try:
            with session.begin_nested():   # a savepoint: losing the race must not end the transaction
                row = model(key=key, **fields)
                session.add(row)
            return row.id
        except IntegrityError:
            continue   # another writer inserted the key between our select and our insert
    raise TuningDBError(f"could neither insert nor find {model.__tablename__} key {key!r}")
