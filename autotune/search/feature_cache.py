"""The IR model's features of configs, kept so that each measured config is lowered once.

Transfer featurizes other shapes' records by lowering each config in its own task (0.15 s for a
conv config), and the same records serve every new shape of the op. The xgb tuner keeps the
features it computed to rank a config it then measured (`keep`), so most records are never
lowered for their features again; the rest are lowered once here. Features are kept in memory
for the process (a graph or a benchmark tunes many shapes in one) and on disk for the next one (a
CLI tune per shape): in the kernel cache's store, keyed as a kernel is, by workload, target,
config and a digest of autotune's source, so features of an edited template are never reused,
and by the task's constant inputs (their weight transforms are hoisted out of the kernel that is
featurized).
"""
from __future__ import annotations

from functools import partial

import numpy as np

from ..costmodel import extract
from ..kernel_cache import DiskCache, MemoryCache, entry_key
from ..schedules.task import Task
from ..target import CpuFacts

KEPT_IN_MEMORY = 8192       # featurized configs (a few MB)
_DTYPE = np.dtype("<f4")     # extract's float32

_memory = MemoryCache(KEPT_IN_MEMORY)     # _memory_key -> features


def target_cpu(task: Task) -> CpuFacts | None:
    """The vector width and cores the IR features relate to (None for GPU code)."""
    return task.target.cpu if task.target.kind == "llvm" else None


def config_features(task: Task, index: int) -> np.ndarray:
    """The IR model's features of one config: its lowered loop IR plus its knob vector."""
    return extract(task.lower(index), task.config_space.knob_vector(index), target_cpu(task))


def _memory_key(task: Task, index: int) -> tuple:
    return task.workload_key, task.target_key, task.constant_inputs, index


def _disk_key(task: Task, index: int) -> str:
    return entry_key(task.workload_key, task.target_key,
                     {"ir_features": task.config(index).to_json(), "constant_inputs": list(task.constant_inputs)})


def _read(disk: DiskCache, key: str) -> np.ndarray | None:
    hit = disk.get(key)
    if hit is None:
        return None
    meta, data = hit
    if meta.get("kind") != "ir_features" or meta.get("length") != len(data) // _DTYPE.itemsize:
        return None
    return np.frombuffer(data, dtype=_DTYPE).astype(np.float32)   # a writable copy, as extract returns


def _store(disk: DiskCache, task: Task, index: int, features: np.ndarray) -> None:
    disk.put(_disk_key(task, index), {"kind": "ir_features", "length": len(features)},
             np.ascontiguousarray(features, dtype=_DTYPE).tobytes())


def _lowered_features(task: Task, index: int, disk: DiskCache) -> np.ndarray:
    """The config's features, lowered now, and stored on disk for the next process."""
    f = config_features(task, index)
    _store(disk, task, index, f)
    return f


def keep(task: Task, index: int, features: np.ndarray, disk: DiskCache | None = None) -> None:
    """Keep the features a tuner computed for a config it measured (to rank it among its pool), in
    memory and on disk: the record's features for a later transfer or resume, not lowered again."""
    _memory.put(_memory_key(task, index), features)
    _store(disk if disk is not None else DiskCache(), task, index, features)


def features_of(task: Task, indices: list[int], disk: DiskCache | None = None) -> list[np.ndarray | None]:
    """config_features of each index of `task` (None where it cannot be lowered), lowering only
    the configs that neither this process nor the disk cache featurized before, on every core."""
    disk = disk if disk is not None else DiskCache()
    keys = [_memory_key(task, i) for i in indices]
    for index, key in zip(indices, keys):
        if _memory.get(key) is None and (f := _read(disk, _disk_key(task, index))) is not None:
            _memory.put(key, f)
    task.prelower([i for i, k in zip(indices, keys) if _memory.get(k) is None])
    out: list[np.ndarray | None] = []
    for index, key in zip(indices, keys):
        try:
            out.append(_memory.get_or_create(key, partial(_lowered_features, task, index, disk)))
        except Exception:   # noqa: BLE001  (a config this version cannot lower: skipped)
            out.append(None)
    return out
