"""The runtime: `autotune.load` gives a program the best known kernel for an op at a shape.

Lookup order: the best valid record for this exact workload and target (in a database written
before float parameters were floats, under its old key: `autotune.legacy_keys`); else the best
record of the nearest tuned shape of the same op whose config is legal here; else the template's
default config. Each fallback warns once per workload, naming what was used. The database is opened
read-only; kernels come from the memory LRU, else the disk cache, else a compile.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import math
import os
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .codegen import compile_for, load_compiled
from .errors import InstantiationError
from .interop import as_numpy
from .ir.hoist import plan_hoist
from .ir.nodes import PrimFunc
from .kernel_cache import DiskCache, MemoryCache, entry_key
from .legacy_keys import current_summaries
from .schedules.task import Task, create_task

_MEMORY = MemoryCache()           # (workload, target, config) -> compiled function
_RESOLVED = MemoryCache(1024)     # load() arguments -> Kernel: the hot path skips task and DB work
_HOISTED = MemoryCache(1024)      # (kernel, constant inputs) -> Hoisted or None
_WARNED: set[tuple[str, str]] = set()
_LOCK = threading.Lock()


def clear_caches() -> None:
    """Forget resolved kernels (e.g. after tuning more in another process); compiled code stays on disk."""
    _MEMORY.clear()
    _RESOLVED.clear()
    _HOISTED.clear()
    with _LOCK:
        _WARNED.clear()


@dataclass
class Kernel:
    """A compiled kernel for one workload: `kernel(*inputs)` returns new outputs,
    `kernel(*inputs, out=arrays)` writes them in place."""

    task: Task
    config: dict
    provenance: str            # "tuned", "tuned:in-model", "nearest:<workload key>" or "default"
    gflops_expected: float | None
    build: Callable[[], Any] = field(repr=False)

    @functools.cached_property
    def func(self) -> Any:
        """The compiled function, built on first use (`load` uses it at once; a model that runs
        the kernel's `hoist` variant instead never builds it)."""
        return self.build()

    def __call__(self, *inputs: Any, out: Any = None) -> Any:
        """Inputs are numpy arrays or any array with `__dlpack__` or `__array_interface__`, read
        in place (`autotune.interop`); `out` arrays must be numpy arrays."""
        n_in = self.task.num_inputs
        if len(inputs) != n_in:
            raise TypeError(f"{self.task.name} takes {n_in} input array(s), got {len(inputs)}")
        inputs = tuple(as_numpy(a, f"{self.task.name}: input {pos}") for pos, a in enumerate(inputs))
        for pos, (a, (shape, _)) in enumerate(zip(inputs, self.task.arg_specs)):
            if tuple(getattr(a, "shape", ())) != tuple(shape):   # before any output is allocated
                raise ValueError(f"{self.task.name}: input {pos}: expected shape {tuple(shape)}, "
                                 f"got {getattr(a, 'shape', type(a).__name__)}")
        specs = self.task.arg_specs[n_in:]
        if out is None:
            outs = [np.empty(shape, dtype) for shape, dtype in specs]
        else:
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
            if len(outs) != len(specs):
                raise TypeError(f"{self.task.name}: out= needs {len(specs)} array(s), got {len(outs)}")
        self.func(*inputs, *outs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    @property
    def workload_key(self) -> str:
        return self.task.workload_key


def _warn_once(task: Task, msg: str) -> None:
    key = (task.workload_key, task.target_key)
    with _LOCK:
        if key in _WARNED:
            return
        _WARNED.add(key)
    warnings.warn(msg, stacklevel=3)


@contextlib.contextmanager
def readable_db(db: Any) -> Iterator[Any]:
    """`db` opened read-only for lookups, or None when the file does not exist: a TuningDB as it
    is (its owner closes it), a path or URL opened here and closed on leaving (compiling a model
    looks up every kernel; each lookup held a connection until garbage collection)."""
    from tuning_db import TuningDB, TuningDBError

    if isinstance(db, TuningDB):
        yield db
        return
    try:
        database = TuningDB(db, readonly=True)
    except TuningDBError as e:
        if "does not exist" not in str(e):
            raise
        database = None
    try:
        yield database
    finally:
        if database is not None:
            database.close()


def _log_scale(x: int) -> float:
    """Sizes compare by ratio; the sign is kept so that small and negative values still differ."""
    return math.copysign(math.log2(1 + abs(x)), x)


def _distance(a: dict[str, Any], b: dict[str, Any]) -> tuple[float, int]:
    """How far apart two shapes of one op are: the summed log-ratio of their size parameters
    (tuples element by element; inf when a parameter differs in kind or length, or a word
    parameter differs: another mode or dtype is another computation, so no such shape is
    nearest), then how many float parameters differ.

    A float parameter (eps, scale, a pad value) changes the numbers computed, not the loop nest,
    and the config borrowed is compiled with this task's own values: a shape tuned at another eps
    is as good a guide as one tuned at this eps, so the count only breaks ties between shapes."""
    if a.keys() != b.keys():
        return math.inf, 0
    total, floats = 0.0, 0
    for name, x in a.items():
        y = b[name]
        if isinstance(x, str) or isinstance(y, str):
            if x != y:
                return math.inf, 0
            continue
        if isinstance(x, float) or isinstance(y, float):
            if not (isinstance(x, float) and isinstance(y, float)):
                return math.inf, 0
            floats += x != y
            continue
        if isinstance(x, tuple) != isinstance(y, tuple):
            return math.inf, 0
        xs, ys = (x, y) if isinstance(x, tuple) else ((x,), (y,))
        if len(xs) != len(ys):
            return math.inf, 0
        total += sum(abs(_log_scale(p) - _log_scale(q)) for p, q in zip(xs, ys))
    return total, floats


def _first_legal(task: Task, records: list, limit: int = 32) -> int | None:
    """The fastest of these records whose config is legal at this task's shape."""
    for rec in sorted(records, key=lambda r: r.cost)[:limit]:
        try:
            index = task.config(rec.config).index
        except InstantiationError:
            continue
        if task.is_valid(index):
            return index
    return None


def _nearest(task: Task, db: Any, shapes: list[tuple[str, Any]],
             warn: Callable[[Task, str], None] = _warn_once) -> tuple[int, str, None] | None:
    """The best legal config of the nearest other tuned shape; `shapes` are (stored key, summary
    under its current key) of the op's workloads."""
    ranked = sorted((_distance(w.params, task.params), stored, w) for stored, w in shapes
                    if w.target_key == task.target_key and w.dtype == task.dtype and w.key != task.workload_key)
    for (size, _), stored, w in ranked:
        if not math.isfinite(size):
            break
        index = _first_legal(task, db.records(stored, task.target_key, ok_only=True))
        if index is not None:
            warn(task, f"autotune: no tuned record for {task.workload_key}; using the config tuned "
                       f"for the nearest shape {w.key}")
            return index, f"nearest:{w.key}", None
    return None


def _choose(task: Task, db: Any, warn: Callable[[Task, str], None] = _warn_once,
            constant_inputs: tuple[int, ...] = ()) -> tuple[int, str, float | None]:
    """(config index, provenance, expected GFLOP/s) by the lookup order above; `warn` is told
    which fallback was taken; the default config is the one for `constant_inputs`
    (`Task.default_for`)."""
    if db is not None:
        best, shapes = db.best(task.workload_key, task.target_key), None
        if best is None:        # a database not yet upgraded may hold it under its legacy key
            shapes = current_summaries(db.workloads(op=task.name))
            stored = next((k for k, w in shapes
                           if w.key == task.workload_key and w.target_key == task.target_key), None)
            best = db.best(stored, task.target_key) if stored is not None else None
        if best is not None:
            try:
                return task.config(best.config).index, "tuned", task.flop / best.cost / 1e9
            except InstantiationError:
                pass  # a record of an older template version: fall through
        found = _nearest(task, db, shapes if shapes is not None else current_summaries(db.workloads(op=task.name)),
                         warn)
        if found is not None:
            return found
    default = task.default_for(constant_inputs)
    index = next((i for i in itertools.chain((default,), range(len(task.config_space)))
                  if task.is_valid(i)), None)
    if index is None:
        raise InstantiationError(f"{task.workload_key}: every config of the template's space is invalid "
                                 "(each one raises in the template), so there is no kernel to load")
    warn(task, f"autotune: no tuned record for {task.workload_key} (nor a usable nearby shape); "
               "using the template's default config — run `autotune tune` for this shape")
    return index, "default", None


def _compile(task: Task, index: int, disk: DiskCache) -> Any:
    return _compile_keyed(task, task.config(index).to_json()["knobs"], lambda: task.lower(index), disk)


def _compile_keyed(task: Task, build: dict, lower: Callable[[], PrimFunc], disk: DiskCache) -> Any:
    """The function `lower()` gives, from the disk cache under (task, `build`: what was built)."""
    key = entry_key(task.workload_key, task.target_key, build)
    hit = disk.get(key)
    if hit is not None:
        try:
            return load_compiled(*hit)
        except Exception:  # noqa: BLE001  (a stale or unloadable entry is rebuilt, never trusted)
            pass
    signature, obj = compile_for(lower(), task.target)
    disk.put(key, signature, obj)
    return load_compiled(signature, obj)


@dataclass(frozen=True)
class Hoisted:
    """A kernel with its weight transforms taken out (`autotune.ir.hoist`), the same task and
    config: `prologue(*constants, *tensors)` fills the hoisted tensors (`specs`: name, shape,
    dtype) from the kernel's constant inputs at positions `prologue_inputs`, once; `func` then
    takes the inputs `sources` names (("input", position) or ("hoisted", index)), then the outputs."""

    func: Any
    prologue: Any
    prologue_inputs: tuple[int, ...]
    sources: tuple[tuple[str, int], ...]
    specs: tuple[tuple[str, tuple[int, ...], str], ...]


def hoist(kernel: Kernel, consts: Iterable[int]) -> Hoisted | None:
    """`kernel` split for inputs at positions `consts` that never change (a model's weights), or
    None when no stage of its schedule reads only those (or the target is not the CPU). Both
    parts are compiled once per process and kept in the disk cache under their own keys."""
    task, consts = kernel.task, tuple(sorted(set(consts)))
    if task.target.kind != "llvm" or not consts:
        return None
    index = task.config(kernel.config).index
    return _HOISTED.get_or_create((task.workload_key, task.target_key, index, consts),
                                  lambda: _hoist(task, index, consts))


def _hoist(task: Task, index: int, consts: tuple[int, ...]) -> Hoisted | None:
    plan = plan_hoist(*task.instantiate(index), consts)
    if plan is None:
        return None
    disk, knobs = DiskCache(), task.config(index).to_json()["knobs"]

    def part(which: str, lower: Callable[[], PrimFunc]) -> Any:
        build = {"knobs": knobs, "hoist": list(consts), "part": which}
        return _compile_keyed(task, build, lower, disk)

    func = part("kernel", lambda: plan.kernel(task.kernel_name))
    prologue = part("prologue", lambda: plan.prologue(f"{task.kernel_name}_prologue"))
    specs = tuple((t.name, tuple(t.shape), t.dtype) for t in plan.tensors)
    return Hoisted(func, prologue, plan.prologue_inputs, plan.sources, specs)


def load(op: str, target: str = "llvm", db: Any = None, dtype: str = "float32", *,
         constant_inputs: Sequence[int] = (), **params: Any) -> Kernel:
    """The best known kernel for `op` at these shape parameters (see the module docstring),
    compiled (or loaded from the disk cache). `constant_inputs`: positions of inputs that never
    change between calls (weights): without a tuned record, the default config is then the one
    the template's rules pick knowing it (`Task.default_for`).

    Resolved kernels are remembered per process (a repeated call costs a dict lookup);
    `clear_caches()` makes the next call consult the database again.
    """
    kernel = resolve(op, target, db, dtype, constant_inputs=constant_inputs, **params)
    kernel.func  # noqa: B018  (compiled here: a kernel that cannot be built fails its load)
    return kernel


def resolve(op: str, target: str = "llvm", db: Any = None, dtype: str = "float32", *,
            constant_inputs: Sequence[int] = (), **params: Any) -> Kernel:
    """`load`'s kernel, not yet compiled: its task, config and provenance (`func` compiles it)."""
    call = _call_key(op, target, db, dtype, constant_inputs, params)
    kernel = _RESOLVED.get(call) if call is not None else None
    if kernel is not None:
        return kernel
    kernel = _resolve_checked(op, target, db, dtype, constant_inputs, params)
    return kernel if call is None else _RESOLVED.get_or_create(call, lambda: kernel)


def _call_key(op: Any, target: Any, db: Any, dtype: Any, constant_inputs: Any, params: dict[str, Any]) -> Any:
    """`load`'s arguments exactly as given, each with its type (64.0 is not 64), where they are
    plain ints, floats, strings and tuples of ints: a repeated call then finds its kernel without
    checking and normalising them again. None for anything else (the checked path keys it)."""
    plain = (int, float, str)

    def exact(v: Any) -> bool:
        return type(v) in plain or (type(v) is tuple and all(type(x) is int for x in v))

    if not (all(exact(v) for v in (op, target, dtype, *params.values()))
            and type(constant_inputs) is tuple and all(type(p) is int for p in constant_inputs)
            and (db is None or type(db) is str)):
        return None
    return ("call", op, target, db, dtype, constant_inputs, *((k, type(v), v) for k, v in params.items()))


def _resolve_checked(op: str, target: str, db: Any, dtype: str, constant_inputs: Sequence[int],
                     params: dict[str, Any]) -> Kernel:
    params = {name: _param_value(op, name, value) for name, value in params.items()}
    consts = _positions(op, constant_inputs)
    db_key = db if isinstance(db, (str, type(None))) else id(db)
    # with each value's type: M=64.0 must not find the kernel of M=64 (64.0 == 64), but fail as create_task would
    key = (op, target, db_key, dtype, tuple(sorted((name, type(v).__name__, v) for name, v in params.items())),
           consts)
    return _RESOLVED.get_or_create(key, lambda: _resolve(op, target, db, dtype, params, consts))


def _positions(op: str, positions: Sequence[int]) -> tuple[int, ...]:
    """`constant_inputs` as sorted distinct ints (the task checks they are input positions)."""
    if isinstance(positions, (str, bytes)) or not isinstance(positions, Sequence) or not all(
            isinstance(p, (int, np.integer)) and not isinstance(p, (bool, np.bool_)) for p in positions):
        raise TypeError(f"load({op!r}): constant_inputs must be a sequence of input positions (ints), "
                        f"got {positions!r}")
    return tuple(sorted({int(p) for p in positions}))


def lookup(op: str, target: str = "llvm", db: Any = None, dtype: str = "float32", **params: Any) -> tuple[Task, str]:
    """The task of this op at these parameters and the provenance `load` would give its kernel
    ("tuned", "nearest:<key>" or "default"), without compiling anything or warning: what a model's
    inspection reports for each kernel it needs."""
    task = create_task(op, target=target, dtype=dtype,
                       **{name: _param_value(op, name, value) for name, value in params.items()})
    with readable_db(db) as database:
        return task, _choose(task, database, warn=lambda task, msg: None)[1]


def _param_value(op: str, name: str, value: Any) -> int | float | str | tuple[int, ...]:
    """A parameter as tasks hold it (numpy scalars become Python's), checked before it keys the
    resolved-kernel cache; create_task then checks it is of the kind the template takes."""
    def is_int(v: Any) -> bool:
        return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))

    if is_int(value):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (tuple, list)) and all(is_int(v) for v in value):
        return tuple(int(v) for v in value)
    raise TypeError(f"load({op!r}): parameter {name} must be an int, a float, a str or a tuple of ints, "
                    f"got {value!r}")


def _db_stamp(db: Any) -> list | None:
    """Identity of a SQLite database file and its WAL (path, size, mtime), or None if not a plain file."""
    if db is not None and not isinstance(db, (str, os.PathLike)):
        return None
    raw = os.fspath(db) if db is not None else os.environ.get("AUTOTUNE_DB") or "./tuning.db"
    if "://" in raw or raw == ":memory:":
        return None
    path = Path(raw).resolve()
    stamp = []
    for p in (path, path.with_name(path.name + "-wal")):
        try:
            st = p.stat()
        except OSError:
            continue
        stamp.append([str(p), st.st_size, st.st_mtime_ns])
    return stamp


def _resolve(op: str, target: str, db: Any, dtype: str, params: dict[str, Any], consts: tuple[int, ...]) -> Kernel:
    task = create_task(op, target=target, dtype=dtype, **params)
    task.input_positions(consts)
    disk = DiskCache()
    stamp = _db_stamp(db)
    constant = {"constant": list(consts)} if consts else {}     # the default config depends on them
    note_key = entry_key(task.workload_key, task.target_key, {"resolved_from": stamp, **constant}) if stamp else None
    note = disk.get_note(note_key) if note_key else None
    if note is not None:                       # same database as last time: no need to open it
        index, provenance, gflops = note["index"], note["provenance"], note["gflops"]
        if provenance != "tuned":
            _warn_once(task, f"autotune: no tuned record for {task.workload_key}; using {provenance} config")
    else:
        with readable_db(db) as database:
            index, provenance, gflops = _choose(task, database, constant_inputs=consts)
        stamp = _db_stamp(db)                  # after reading: opening may have touched the WAL
        if stamp:
            note_key = entry_key(task.workload_key, task.target_key, {"resolved_from": stamp, **constant})
            disk.put_note(note_key, {"index": index, "provenance": provenance, "gflops": gflops})
    return _kernel(task, index, provenance, gflops, disk)


def with_config(kernel: Kernel, config: int | dict, provenance: str) -> Kernel:
    """`kernel`'s workload run with another config of its space (an index, or a record's JSON)
    instead: a model's choice by the configs' times inside it (`autotune.graph.in_model`).
    InstantiationError when the config is not one of the space's (a knob it names is gone)."""
    task = kernel.task
    return _kernel(task, task.config(config).index, provenance, None, DiskCache())


def _kernel(task: Task, index: int, provenance: str, gflops: float | None, disk: DiskCache) -> Kernel:
    config = task.config(index).to_json()
    return Kernel(task, config, provenance, gflops, lambda: _MEMORY.get_or_create(
        (task.workload_key, task.target_key, index), lambda: _compile(task, index, disk)))
