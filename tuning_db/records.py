"""The plain values the tuning database hands back (and takes in), and its one error class.

Frozen dataclasses holding JSON-able data only: callers never see ORM rows, sessions or
SQLAlchemy exceptions. `Record` validates itself on construction, so a bad measurement is
refused with the field's name before it reaches the database or a JSONL file.
"""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from typing import Any

# The outcomes a measurement can have (mirrors autotune.measure.ErrorKind, which we must not import).
ERROR_KINDS = ("ok", "build_error", "runtime_error", "timeout", "wrong_result", "crash", "instantiation_error")
RUN_STATUSES = ("running", "finished", "interrupted", "failed")


class TuningDBError(ValueError):
    """The database cannot be opened or written as asked; the message names the path and the reason."""


def is_number(value: Any) -> bool:
    """An int or float that is not a bool (JSON true/false must not pass for 1/0)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check(cond: bool, field: str, expected: str, got: Any) -> None:
    if not cond:
        raise ValueError(f"field {field!r}: expected {expected}, got {got!r}")


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
            _check(isinstance(value, str) and value != "", name, "a non-empty string", value)
        _check(isinstance(self.config_index, int) and not isinstance(self.config_index, bool)
               and self.config_index >= 0, "config_index", "an integer >= 0", self.config_index)
        _check(isinstance(self.config, dict), "config", "a JSON object (dict)", self.config)
        try:
            json.dumps(self.config, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise ValueError(f"field 'config': expected plain JSON (no NaN, no objects), {e}") from None
        _check(isinstance(self.costs, (tuple, list)), "costs", "a list of seconds", self.costs)
        _check(all(is_number(c) and math.isfinite(c) and c >= 0 for c in self.costs), "costs",
               "finite non-negative seconds", self.costs)
        object.__setattr__(self, "costs", tuple(float(c) for c in self.costs))
        _check(self.error_kind in ERROR_KINDS, "error_kind", f"one of {list(ERROR_KINDS)}", self.error_kind)
        _check(self.error_kind != "ok" or len(self.costs) > 0, "costs", "at least one timing for an ok record",
               self.costs)
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
