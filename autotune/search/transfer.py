"""Transfer: measured records of other shapes of the same op warm-start the model-guided tuner.

Loop-IR features mean the same thing at every shape of one template, and knob vectors do once
a record's knob values are placed in the new shape's space by name and value
(`ConfigSpace.aligned_knob_vector`: a conv's knobs and their order differ by shape), so the
records of other workloads of the op (same dtype and target) can train the cost models before a
new shape has a single measurement, and their best configs are the first candidates worth
trying. What warm start costs is lowering each transferred config in its own shape's task the
first time it is featurized (tens of ms each for a GEMM, about 0.15 s for a conv: 192 conv
configs took 29 s, Zen 4, the other core busy; later reads come from feature_cache.py), so each
workload gives at most its best few and a seeded random sample of the rest (ranking needs slow
configs too), and all of them together at most MAX_RECORDS, taken from the nearest shapes first:
what is fast at a shape says most about shapes of similar sizes. Each workload's sample is seeded
by its own key, so the next shape meets the same records and their kept features.
"""
from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..costmodel import with_knobs
from ..errors import InstantiationError
from ..schedules.task import Task, create_task
from .feature_cache import features_of

MAX_RECORDS = 192           # lowered once: GEMMs 4-8 s on a busy 2-core machine, convs up to 30 s
MIN_PER_WORKLOAD = 12
STARTS_PER_WORKLOAD = 2     # each workload's best configs, tried in the new shape first
UNLIKE = 4.0                # the distance of a parameter that is not a size and differs (16x in one size)


@dataclass
class TransferSet:
    """Rows of other workloads for the cost models, and candidate configs for this task."""

    ir: np.ndarray              # IR features: the record's loop IR in its own task, its knobs placed as below
    knobs: np.ndarray           # knob vectors in this task's layout (ConfigSpace.aligned_knob_vector)
    throughput: np.ndarray      # 1 / seconds
    groups: list[str]           # workload key of each row (one ranking group per workload)
    starts: list[int]           # this task's indices of the other workloads' best configs
    workloads: int
    seconds: float              # what loading took

    def __len__(self) -> int:
        return len(self.groups)


def _param_distance(a: Any, b: Any) -> float:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return sum(_param_distance(x, y) for x, y in zip(a, b))
    sizes = all(isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 for v in (a, b))
    if sizes:
        return abs(math.log2((a + 1) / (b + 1)))
    return 0.0 if a == b else UNLIKE


def shape_distance(a: dict[str, Any], b: dict[str, Any]) -> float:
    """How far apart two workloads of one op are: |log2| of each size's ratio summed (2x in one
    dimension is 1), UNLIKE for each other parameter that differs or is missing."""
    return sum(_param_distance(a[k], b[k]) if k in a and k in b else UNLIKE for k in a.keys() | b.keys())


def _others(task: Task, db: Any) -> list[Any]:
    """The op's other workloads of this target and dtype, nearest shapes first."""
    others = [w for w in db.workloads(op=task.name)
              if w.key != task.workload_key and w.target_key == task.target_key and w.dtype == task.dtype]
    return sorted(others, key=lambda w: (shape_distance(task.params, w.params), w.key))


def _task_of(task: Task, w: Any) -> Task | None:
    """The other workload's task, its inputs constant where `task`'s are, so that its records are
    lowered as this task's candidates are (weight transforms hoisted out of the kernel: without,
    a blocked or Winograd conv's features would count the repacking its measurement did not run);
    None for a shape this version's template refuses."""
    try:
        other = create_task(task.name, target=task.target, dtype=w.dtype, **w.params)
        other.set_constant_inputs(task.constant_inputs)
        return other
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
    ir: list[np.ndarray] = []
    knobs: list[list[float]] = []
    thr: list[float] = []
    groups: list[str] = []
    starts: list[int] = []
    used = 0
    for w in others:
        if len(groups) >= MAX_RECORDS:
            break
        other = _task_of(task, w)
        if other is None:
            continue
        rng = random.Random(f"{seed}:{w.key}")
        picked = _pick(db.records(w.key, task.target_key, ok_only=True), quota, rng)[:max(0, MAX_RECORDS - len(groups))]
        found = [(r, i) for r in picked if (i := _index_here(other, r.config)) is not None]
        for (rec, _), f in zip(found, features_of(other, [i for _, i in found])):
            if f is None:
                continue
            aligned = task.config_space.aligned_knob_vector(rec.config["knobs"])
            ir.append(with_knobs(f, aligned))
            knobs.append(aligned)
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
