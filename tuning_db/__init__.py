"""The tuning database (a SQLite file, or PostgreSQL for many machines, through SQLAlchemy);
filled by the tuning engine.

It stores JSON only (configs, costs) keyed by workload and target strings and knows nothing
of the compiler. Open one with `TuningDB(path_or_url)`; read results come back as the frozen
dataclasses `Record`, `WorkloadSummary` and `RunInfo`; every failure is a `TuningDBError`.

The names below are imported on first use, so `tuning_db.boundary` (the bounds on stored JSON,
which the kernel cache also uses) loads without SQLAlchemy.
"""
from __future__ import annotations

import importlib
from typing import Any

_HOME = {"TuningDB": "db", "SCHEMA_VERSION": "schema", "ERROR_KINDS": "records", "RUN_STATUSES": "records",
         "Record": "records", "RunInfo": "records", "TuningDBError": "records", "WorkloadSummary": "records"}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'tuning_db' has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_HOME[name]}", __name__), name)
