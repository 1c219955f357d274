"""The tuning database (SQLite through SQLAlchemy); filled by the tuning engine.

It stores JSON only (configs, costs) keyed by workload and target strings and knows nothing
of the compiler. Open one with `TuningDB(path_or_url)`; read results come back as the frozen
dataclasses `Record`, `WorkloadSummary` and `RunInfo`; every failure is a `TuningDBError`.
"""
from .db import TuningDB
from .records import ERROR_KINDS, RUN_STATUSES, Record, RunInfo, TuningDBError, WorkloadSummary
from .schema import SCHEMA_VERSION

__all__ = ["ERROR_KINDS", "RUN_STATUSES", "SCHEMA_VERSION", "Record", "RunInfo", "TuningDB", "TuningDBError",
           "WorkloadSummary"]
