"""A task's check data, made once in the parent and handed to the runner worker as files.

Every candidate of a task runs on the same fixed random inputs and is compared with the same
expected outputs, from the template's numpy reference or, for a computation defined with te,
the te evaluator. Making them here means the runner needs no template and no user code: it
reads `input{i}.npy` / `expected{i}.npy` (numpy's format, never pickled objects) from the
task's directory, and the output specs and tolerances from the request (`CheckData.to_json`).
"""
from __future__ import annotations

import math
import os
import shutil
import tempfile
import weakref
import zlib
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..schedules.task import Task

_BASE_TOL = {"float16": 1e-2, "float32": 1e-4, "float64": 1e-9}
MAX_TASKS_ON_DISK = 8
_PREFIX = "autotune-check-"


def tolerance(dtype: str, reduction: int, options: dict[str, Any]) -> tuple[float, float]:
    """(rtol, atol): exact for integers; for floats a base by precision, atol grown with the
    square root of the reduction length (rounding errors of a sum in another order grow so)."""
    base = _BASE_TOL.get(dtype, 0.0)
    rtol = options["rtol"] if options.get("rtol") is not None else base
    atol = options["atol"] if options.get("atol") is not None else base * math.sqrt(reduction)
    return float(rtol), float(atol)


def task_inputs(task: Task) -> list[np.ndarray]:
    """The task's fixed random inputs (seeded by its workload key, never all zero: an all-zero
    input times unrealistically and hides wrong results)."""
    rng = np.random.default_rng(zlib.crc32(task.workload_key.encode()))
    inputs = task.make_inputs(rng)
    for a in inputs:
        if a.size and not np.any(a):
            a.flat[0] = 1
    return inputs


@dataclass(frozen=True)
class CheckData:
    """Where a task's arrays are and what the runner needs besides them."""

    directory: str
    num_inputs: int
    outputs: tuple[dict[str, Any], ...]    # {"shape", "dtype", "rtol", "atol"} per output
    check: bool                            # expected outputs were written
    constant_inputs: tuple[int, ...] = ()  # Task.constant_inputs: what MeasureOptions.cold_weights keeps cold

    def to_json(self) -> dict[str, Any]:
        return {"directory": self.directory, "num_inputs": self.num_inputs, "outputs": list(self.outputs),
                "check": self.check, "constant_inputs": list(self.constant_inputs)}


@dataclass(frozen=True)
class CheckArrays:
    """A task's check data in memory: what travels to a runner on another machine (as data)."""

    inputs: tuple[np.ndarray, ...]
    expected: tuple[np.ndarray, ...]       # empty unless check
    outputs: tuple[dict[str, Any], ...]
    check: bool
    constant_inputs: tuple[int, ...] = ()


def check_arrays(task: Task, options: dict[str, Any]) -> CheckArrays:
    """The task's inputs (and, with options["check"], its expected outputs) and output specs."""
    inputs = task_inputs(task)
    expected = tuple(np.asarray(r) for r in task.reference(inputs)) if options["check"] else ()
    outputs = tuple({"shape": list(shape), "dtype": dtype,
                     **dict(zip(("rtol", "atol"), tolerance(dtype, task.reduction, options)))}
                    for shape, dtype in task.arg_specs[task.num_inputs:])
    return CheckArrays(tuple(inputs), expected, outputs, bool(options["check"]), task.constant_inputs)


def save_check_arrays(arrays: CheckArrays, directory: Path) -> CheckData:
    """Write the arrays where a runner worker on this machine reads them."""
    directory.mkdir(parents=True, exist_ok=True)
    for i, a in enumerate(arrays.inputs):
        np.save(directory / f"input{i}.npy", a, allow_pickle=False)
    for i, r in enumerate(arrays.expected):
        np.save(directory / f"expected{i}.npy", r, allow_pickle=False)
    return CheckData(str(directory), len(arrays.inputs), arrays.outputs, arrays.check, arrays.constant_inputs)


def write_check_data(task: Task, directory: Path, options: dict[str, Any]) -> CheckData:
    """Make the task's check data and write it."""
    return save_check_arrays(check_arrays(task, options), directory)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:       # alive, another user's
        pass
    return True


def remove_orphans(tmp: Path) -> None:
    """Remove the check data of stores whose process died without closing them (killed by a
    signal, or a Ray actor killed by its pool): the directory's name carries its owner's pid."""
    for directory in tmp.glob(f"{_PREFIX}*-*"):
        pid = directory.name[len(_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(directory, ignore_errors=True)


class CheckDataStore:
    """The check data of the last few tasks, in a private temporary directory removed on close
    (or at exit; a later store removes it if its process was killed). Keyed by workload, target
    and constant inputs: equal tasks share their data."""

    def __init__(self) -> None:
        remove_orphans(Path(tempfile.gettempdir()))
        self.root = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-"))
        self._cleanup = weakref.finalize(self, shutil.rmtree, self.root, True)
        self._entries: OrderedDict[Hashable, CheckData | Exception] = OrderedDict()
        self._made = 0

    def get(self, task: Task, options: dict[str, Any]) -> CheckData:
        key = (task.workload_key, task.target_key, bool(options["check"]), task.constant_inputs)
        return self.fetch(key, lambda directory: write_check_data(task, directory, options))

    def fetch(self, key: Hashable, make: Callable[[Path], CheckData]) -> CheckData:
        """The data stored under `key`, or what `make` writes into a fresh directory. A `make`
        that failed raises its error again: a failing reference runs once, not once per candidate."""
        data = self._entries.get(key)
        if data is None:
            self._made += 1
            directory = self.root / f"task{self._made}"
            try:
                data = make(directory)
            except Exception as exc:  # noqa: BLE001  (kept and raised to each caller of this key)
                shutil.rmtree(directory, ignore_errors=True)
                data = exc
            self._entries[key] = data
            while len(self._entries) > MAX_TASKS_ON_DISK:
                _, old = self._entries.popitem(last=False)
                if isinstance(old, CheckData):
                    shutil.rmtree(old.directory, ignore_errors=True)
        self._entries.move_to_end(key)
        if isinstance(data, Exception):
            raise data.with_traceback(None)
        return data

    def close(self) -> None:
        self._cleanup()
