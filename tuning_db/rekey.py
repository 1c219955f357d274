"""Renaming stored workloads, for a client that changes how it writes workload keys.

The database cannot tell what a key means, so the client maps each stored workload (op, params,
dtype) to its key and params as it writes them now (autotune did when float parameters became
floats), and `rekey` rewrites them inside the one transaction `TuningDB.rekey_workloads` hands
it. A workload whose new key is stored already is merged into it: its runs and records move
over, so nothing measured is lost and a resumed tuner skips what was measured under either key;
a record stored under both (same target, config and timestamp: JSONL import's rule) is kept once,
and a config's timings inside one model under both keys become one list.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session, aliased

from .boundary import check_params
from .records import median_cost
from .schema import ClaimRow, ModelTimingRow, RecordRow, RunRow, WorkloadRow, workload_params

Rekey = Callable[[str, dict[str, Any], str], "tuple[str, dict[str, Any]] | None"]


def rekey(session: Session, new_key: Rekey) -> int:
    """Apply `new_key(op, params, dtype) -> (key, params) | None` to every stored workload with
    valid params; returns how many were renamed."""
    renamed = 0
    for row in session.scalars(select(WorkloadRow).order_by(WorkloadRow.id)).all():
        try:
            params = workload_params(row)
        except ValueError:
            continue              # readers skip it too; there is nothing to map
        new = new_key(row.op, params, row.dtype)
        if new is not None and new[0] != row.key:
            _rename(session, row, new[0], check_params(new[1], f"new params of workload {new[0]!r}"))
            renamed += 1
    return renamed


def _rename(session: Session, row: WorkloadRow, key: str, params: dict[str, Any]) -> None:
    """Give `row` a new key, or merge it into the workload stored under that key."""
    into = session.scalar(select(WorkloadRow.id).where(WorkloadRow.key == key))
    if into is None:
        row.key, row.params = key, params
        session.flush()           # the next workload mapped to this key must find it
        return
    kept = aliased(RecordRow)
    twin = select(kept.id).where(kept.workload_id == into, kept.target_id == RecordRow.target_id,
                                 kept.config_index == RecordRow.config_index, kept.timestamp == RecordRow.timestamp)
    session.execute(delete(RecordRow).where(RecordRow.workload_id == row.id, twin.exists()),
                    execution_options={"synchronize_session": False})
    for model in (RunRow, RecordRow):
        session.execute(update(model).where(model.workload_id == row.id).values(workload_id=into))
    _merge_model_timings(session, row.id, into)
    # claims are leases of tuners measuring under the old key right now; they end with it (at
    # worst a config in flight is measured twice, never skipped unmeasured)
    session.execute(delete(ClaimRow).where(ClaimRow.workload_id == row.id))
    session.delete(row)
    session.flush()


def _merge_model_timings(session: Session, old: int, into: int) -> None:
    """Move workload `old`'s in-model timings to workload `into`, joining a config's timings in
    one model when both have them."""
    for timing in session.scalars(select(ModelTimingRow).where(ModelTimingRow.workload_id == old)).all():
        twin = session.get(ModelTimingRow, {"model_key": timing.model_key, "target_id": timing.target_id,
                                            "workload_id": into, "config_index": timing.config_index})
        if twin is None:
            session.add(ModelTimingRow(model_key=timing.model_key, target_id=timing.target_id, workload_id=into,
                                       config_index=timing.config_index, costs=list(timing.costs), cost=timing.cost,
                                       updated_at=timing.updated_at))
        else:
            twin.costs = [*twin.costs, *timing.costs]
            twin.cost = cast(float, median_cost("ok", twin.costs))
            twin.updated_at = max(twin.updated_at, timing.updated_at)
        session.delete(timing)
    session.flush()
