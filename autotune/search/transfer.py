"""Transfer: measured records of other shapes of the same op warm-start the model-guided tuner.

Loop-IR features and knob vectors mean the same thing at every shape of one template, so the
records of other workloads of the op (same dtype and target) can train the cost models before a
new shape has a single measurement, and their best configs are the first candidates worth
trying. What warm start costs is lowering each transferred config in its own shape's task (tens
of ms each for a GEMM, about 0.15 s for a conv: 192 conv configs took 29 s, Zen 4, the other
core busy), so each workload gives at most its best few and a seeded random sample of the rest
(ranking needs slow configs too), and all of them together at most MAX_RECORDS, taken from the
workloads in the database's order.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InstantiationError
from ..schedules.task import Task, create_task
from .xgb import config_features

MAX_RECORDS = 192           # GEMMs: about 4-8 s of lowering on a busy 2-core machine; convs up to 30 s
MIN_PER_WORKLOAD = 12
STARTS_PER_WORKLOAD = 2     # each workload's best configs, tried in the new shape first


@dataclass
class TransferSet:
    """Rows of other workloads for the cost models, and candidate configs for this task."""

    ir: np.ndarray              # IR features (config_features in the record's own task)
    knobs: np.ndarray           # knob vectors
    throughput: np.ndarray      # 1 / seconds
    groups: list[str]           # workload key of each row (one ranking group per workload)
    starts: list[int]           # this task's indices of the other workloads' best configs
    workloads: int
    seconds: float              # what loading took

    def __len__(self) -> int:
        return len(self.groups)


def _others(task: Task, db: Any) -> list[Any]:
    return [w for w in db.workloads(op=task.name)
            if w.key != task.workload_key and w.target_key == task.target_key and w.dtype == task.dtype]


def _task_of(task: Task, w: Any) -> Task | None:
    """The other workload's task (None for a shape this version's template refuses)."""
    try:
        return create_task(task.name, target=task.target, dtype=w.dtype, **w.params)
    except (ValueError, TypeError):
        return None


def _pick(records: list[Any], quota: int, rng: random.Random) -> list[Any]:
    """The best half of `quota` distinct configs and a random sample of the rest, best first."""
    best: dict[str, Any] = {}
    for r in records:
        key = repr(sorted(r.config["knobs"].items()))
        if key not in best or r.cost < best[key].cost:
            best[key] = r
    ranked = sorted(best.values(), key=lambda r: r.cost)
    top, rest = ranked[:quota // 2], ranked[quota // 2:]
    return top + sorted(rng.sample(rest, min(len(rest), quota - len(top))), key=lambda r: r.cost)


def _index_here(task: Task, config: dict) -> int | None:
    """The config's index in `task`'s space (None where the space has no such config)."""
    try:
        return task.config_space.from_json(config).index
    except InstantiationError:
        return None


def load_transfer(task: Task, db: Any, seed: int | None) -> TransferSet | None:
    """The records of other shapes of `task`'s op in `db`, featurized; None when there are none."""
    t0 = time.perf_counter()
    others = _others(task, db)
    quota = max(MIN_PER_WORKLOAD, MAX_RECORDS // max(len(others), 1))
    rng = random.Random(seed)
    width = len(task.config_space.knob_vector(0))
    ir: list[np.ndarray] = []
    knobs: list[list[float]] = []
    thr: list[float] = []
    groups: list[str] = []
    starts: list[int] = []
    used = 0
    for w in others:
        other = _task_of(task, w)
        if other is None or len(other.config_space.knob_vector(0)) != width:
            continue    # a knob layout that differs by shape is not the same space
        picked = _pick(db.records(w.key, task.target_key, ok_only=True), quota, rng)[:max(0, MAX_RECORDS - len(groups))]
        indices = [_index_here(other, r.config) for r in picked]
        other.prelower([i for i in indices if i is not None])
        for rec, index in zip(picked, indices):
            if index is None:
                continue
            try:
                ir.append(config_features(other, index))
            except Exception:   # noqa: BLE001  (a config this version cannot lower: skipped)
                continue
            knobs.append(other.config_space.knob_vector(index))
            thr.append(1.0 / rec.cost)
            groups.append(w.key)
        used += bool(picked)
        starts += [i for r in picked[:STARTS_PER_WORKLOAD] if (i := _index_here(task, r.config)) is not None]
    if not groups:
        return None
    task.prelower(starts)
    starts = [i for i in starts if task.is_valid(i)]
    return TransferSet(np.stack(ir), np.asarray(knobs, dtype=np.float32), np.asarray(thr), groups,
                       list(dict.fromkeys(starts)), used, time.perf_counter() - t0)
