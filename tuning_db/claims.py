"""Claims: the leases concurrent tuners take on configs before measuring them, correct on
PostgreSQL's READ COMMITTED as well as under SQLite's one writer at a time.

A claim is taken with one INSERT ... ON CONFLICT DO UPDATE that succeeds only where the row is
absent, ours, or expired, so two tuners can never both take a config; the records are checked
only after that, in a later statement (a later snapshot), so a config measured by a tuner that
committed while we claimed is seen and given back. Rows are locked in ascending config order by
every statement that locks several (the upsert, and `release` through SELECT ... ORDER BY ... FOR
UPDATE), so concurrent claimers and record writers never deadlock.
"""
from __future__ import annotations

from typing import Any

from sqlalchemy import delete, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from .records import TuningDBError
from .schema import ClaimRow, RecordRow, RunRow

_UPSERTS = {"postgresql": postgresql.insert, "sqlite": sqlite.insert}


def take(session: Session, run: RunRow, indices: list[int], now: float, lease_s: float) -> list[int]:
    """Those of `indices` (in order) that `run` now holds until now + lease_s and that no run has measured."""
    if not indices:
        return []
    upsert = _UPSERTS.get(session.get_bind().dialect.name)
    if upsert is None:
        raise TuningDBError(f"claims need INSERT ... ON CONFLICT (SQLite or PostgreSQL), not "
                            f"{session.get_bind().dialect.name}")
    same = (ClaimRow.workload_id == run.workload_id, ClaimRow.target_id == run.target_id)
    stmt: Any = upsert(ClaimRow).values([{"workload_id": run.workload_id, "target_id": run.target_id,
                                          "config_index": i, "run_id": run.id, "expires_at": now + lease_s}
                                         for i in sorted(indices)])
    stmt = stmt.on_conflict_do_update(
        index_elements=[ClaimRow.workload_id, ClaimRow.target_id, ClaimRow.config_index],
        set_={"run_id": stmt.excluded.run_id, "expires_at": stmt.excluded.expires_at},
        where=or_(ClaimRow.run_id == run.id, ClaimRow.expires_at < now)).returning(ClaimRow.config_index)
    held = set(session.scalars(stmt))
    measured = set(session.scalars(select(RecordRow.config_index).where(
        RecordRow.workload_id == run.workload_id, RecordRow.target_id == run.target_id,
        RecordRow.config_index.in_(held))))
    if measured:
        session.execute(delete(ClaimRow).where(*same, ClaimRow.config_index.in_(measured)))
    return [i for i in indices if i in held and i not in measured]


def release(session: Session, run_id: int, indices: list[int] | None = None) -> None:
    """Drop the run's claims (those on `indices`, or all): locked in config order, then deleted."""
    mine = select(ClaimRow.config_index).where(ClaimRow.run_id == run_id)
    if indices is not None:
        mine = mine.where(ClaimRow.config_index.in_(indices))
    locked = list(session.scalars(mine.order_by(ClaimRow.config_index).with_for_update()))
    if locked:
        session.execute(delete(ClaimRow).where(ClaimRow.run_id == run_id, ClaimRow.config_index.in_(locked)))
