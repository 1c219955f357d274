"""The plain values the tuning database hands back (and takes in), and its one error class.

Frozen dataclasses holding JSON-able data only: callers never see ORM rows, sessions or
SQLAlchemy exceptions. `Record` validates itself on construction, so a bad measurement is
refused with the field's name before it reaches the database or a JSONL file.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from .boundary import check_costs, check_json, is_int, is_number, short_repr

# The outcomes a measurement can have (mirrors autotune.measure.ErrorKind, which we must not import).
ERROR_KINDS = ("ok", "build_error", "runtime_error", "timeout", "wrong_result", "crash", "instantiation_error")
RUN_STATUSES = ("running", "finished", "interrupted", "failed")
KEY_LENGTH = 1024   # workload and target keys; SQLite ignores it, other databases need a bound to index


class TuningDBError(ValueError):
    """The database cannot be opened or written as asked; the message names the path and the reason."""


def _check(cond: bool, field: str, expected: str, got: Any) -> None:
    if not cond:
        raise ValueError(f"field {field!r}: expected {expected}, got {short_repr(got)}")


@dataclass(frozen=True)
class Record:
    """One measured config of one workload on one target.

    costs: seconds per call of each timing; may be empty for a failed measurement.
    error_kind: one of ERROR_KINDS; only "ok" records have a cost.
    timestamp: unix time of the measurement; with the keys and config_index it identifies the
        record across databases (JSONL import skips duplicates by it).
    run_id: the run that produced it; None before it is stored.
    """

    workload_key: str
    target_key: str
    config_index: int
    config: dict[str, Any]
    costs: tuple[float, ...]
    error_kind: str
    error_msg: str
    build_seconds: float
    timestamp: float
    run_id: int | None = None

    def __post_init__(self) -> None:
        for name in ("workload_key", "target_key"):
            value = getattr(self, name)
            _check(isinstance(value, str) and 0 < len(value) <= KEY_LENGTH, name,
                   f"a non-empty string of at most {KEY_LENGTH} characters", value)
        _check(is_int(self.config_index) and self.config_index >= 0, "config_index",
               "an integer in [0, 2**63)", self.config_index)
        _check(isinstance(self.config, dict), "config", "a JSON object (dict)", self.config)
        check_json(self.config, "field 'config'")
        _check(self.error_kind in ERROR_KINDS, "error_kind", f"one of {list(ERROR_KINDS)}", self.error_kind)
        object.__setattr__(self, "costs", check_costs(self.costs, self.error_kind == "ok"))
        _check(isinstance(self.error_msg, str), "error_msg", "a string", self.error_msg)
        _check(is_number(self.build_seconds) and math.isfinite(self.build_seconds) and self.build_seconds >= 0,
               "build_seconds", "finite seconds >= 0", self.build_seconds)
        _check(is_number(self.timestamp) and math.isfinite(self.timestamp) and self.timestamp >= 0,
               "timestamp", "a finite unix time >= 0", self.timestamp)
        object.__setattr__(self, "build_seconds", float(self.build_seconds))
        object.__setattr__(self, "timestamp", float(self.timestamp))

    @property
    def ok(self) -> bool:
        return self.error_kind == "ok"

    @property
    def cost(self) -> float | None:
        """The median of `costs` in seconds; None for a failed measurement."""
        return median_cost(self.error_kind, self.costs)


def median_cost(error_kind: str, costs: tuple[float, ...] | list[float]) -> float | None:
    """The one definition of a record's cost, shared by `Record.cost` and the indexed column."""
    if error_kind != "ok" or not costs:
        return None
    return float(statistics.median(costs))


@dataclass(frozen=True)
class WorkloadSummary:
    """What has been tuned for one (workload, target): counts, the best, and when.

    trials/errors count the stored records (so they shrink after `compact`).
    best_cost/best_config/best_index are None when no record is ok yet.
    """

    key: str
    op: str
    params: dict[str, Any]
    dtype: str
    target_key: str
    trials: int
    errors: int
    best_cost: float | None
    best_config: dict[str, Any] | None
    best_index: int | None
    last_timestamp: float | None


@dataclass(frozen=True)
class RunInfo:
    """One tuning session (or one JSONL import, tuner "import") of a workload on a target."""

    id: int
    workload_key: str
    target_key: str
    tuner: str
    trials_asked: int
    trials_done: int
    seed: int | None
    started_at: float
    ended_at: float | None
    status: str
