"""Workloads stored before float task parameters were floats, under the keys they have now.

Tuning databases of schema version 2 and older hold a float parameter (layer_norm's eps,
attention's scale, pad's value) as (mantissa, exponent) ints meaning mantissa * 10**exponent, or
as a plain int when whole: key `layer_norm(M=4,N=8,eps=1:-5)float32`, params {"eps": [1, -5]}.
Now it is `eps=1e-05` and {"eps": 1e-05}. Only the templates know which parameters are floats,
so this module, not the database, maps a stored workload to its current key (`current_workload`).
A writer renames such workloads in place (`upgrade`, before it tunes: a resumed run then finds
every earlier measurement under its key); a reader, which may not write the file, sees them
under their current keys (`current_summaries`).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from .schedules.task import TEMPLATES, _load_templates, workload_key


def _float_params(op: str) -> set[str]:
    """The parameters the templates of `op` take as floats (none for an op not registered)."""
    _load_templates(op)
    return {name for (name_of_op, _), tmpl in TEMPLATES.items() if name_of_op == op
            for name, kind in tmpl.param_kinds.items() if kind == "float"}


def legacy_float(value: Any) -> float | None:
    """The float that a stored legacy float parameter means; None if `value` is not one."""
    def is_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    if is_int(value):
        x = float(value)
    elif isinstance(value, (list, tuple)) and len(value) == 2 and all(map(is_int, value)):
        x = float(f"{value[0]}e{value[1]}")       # exact: the decimal text of the float it came from
    else:
        return None
    return x + 0.0 if math.isfinite(x) else None   # -0.0 is 0.0, as in a task's key


def current_workload(op: str, params: dict[str, Any], dtype: str) -> tuple[str, dict[str, Any]] | None:
    """(key, params) of a workload stored with legacy float parameters, as a task writes them now;
    None when it has none (or one that means no finite float: no task could have made it)."""
    floats = _float_params(op)
    old = {name: value for name, value in params.items() if name in floats and not isinstance(value, float)}
    new = {name: legacy_float(value) for name, value in old.items()}
    if not old or None in new.values():
        return None
    params = {**params, **new}
    return workload_key(op, params, dtype), params


def upgrade(db: Any) -> int:
    """Rename, in place, the workloads `db` holds under legacy keys; how many were renamed. Cheap
    when there are none, so a writer calls it each time before tuning."""
    return db.rekey_workloads(current_workload)


def current_summaries(summaries: list[Any]) -> list[tuple[str, Any]]:
    """(stored key, the summary under its current key and params) of each WorkloadSummary."""
    out = []
    for w in summaries:
        new = current_workload(w.op, w.params, w.dtype)
        out.append((w.key, w if new is None else dataclasses.replace(w, key=new[0], params=new[1])))
    return out
