"""The runner: checks and times built candidates in one persistent, isolated worker process.

`handle_run` is what the worker does with one candidate: load its object code, run it once on
the task's fixed random inputs and compare with the numpy reference, warm up, then take
`repeat` timings of `number` calls through `BuiltFunction.bind` (about 1 us of Python per call).
`LocalRunner` feeds it candidates one at a time; a worker that segfaults (CRASH) or outlives
`run_timeout_s` (TIMEOUT, killed) is replaced and the batch carries on. The parent never loads
candidate code.
"""
from __future__ import annotations

import itertools
import math
import os
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .types import BuildResult, ErrorKind, MeasureInput, MeasureOptions, MeasureResult
from .worker import WorkerDied, WorkerHandle, first_line, task_of

PREPARE_TIMEOUT_S = 300.0   # inputs + numpy reference of a task (not the candidate's time)
MAX_NUMBER = 1 << 24
MAX_GROWTH = 8
_BASE_TOL = {"float16": 1e-2, "float32": 1e-4, "float64": 1e-9}


# -- inside the runner worker: the task's data ---------------------------------------------------
@dataclass
class _TaskData:
    inputs: list[np.ndarray]
    reference: list[np.ndarray] | None
    reduction: int                    # largest reduction length, for the float tolerance


_DATA: OrderedDict[str, _TaskData] = OrderedDict()
_MAX_DATA = 4


def _reduction_size(task: Any) -> int:
    """The longest reduction in the task's computation (product of a stage's reduce extents)."""
    from ..schedules.space import ConfigSpace
    from ..te.tensor import ComputeOp, ExternOp

    _, args = task.template.func(ConfigSpace(), **task.params, dtype=task.dtype)
    best, seen, stack = 1, set(), [t.op for t in args]
    while stack:
        op = stack.pop()
        if id(op) in seen or not isinstance(op, (ComputeOp, ExternOp)):
            continue
        seen.add(id(op))
        longest = op.reduction if isinstance(op, ExternOp) else math.prod(iv.extent for iv in op.reduce_axis)
        best = max(best, longest)
        stack.extend(t.op for t in op.input_tensors)
    return best


def _prepare(task: Any, check: bool, event: Callable[[dict[str, Any]], None]) -> _TaskData:
    """The task's inputs (fixed seed, never all zero) and reference, made once. The parent is
    told before and after, so this never counts against a candidate's timeout."""
    data = _DATA.get(task.workload_key)
    if data is not None and (data.reference is not None or not check):
        _DATA.move_to_end(task.workload_key)
        return data
    event({"event": "preparing"})
    rng = np.random.default_rng(zlib.crc32(task.workload_key.encode()))
    inputs = task.make_inputs(rng)
    for a in inputs:
        if a.size and not np.any(a):
            a.flat[0] = 1
        a.flags.writeable = False     # shared by every candidate of the task
    reference = [np.asarray(r) for r in task.reference(inputs)] if check else None
    data = _DATA[task.workload_key] = _TaskData(inputs, reference, _reduction_size(task) if check else 1)
    while len(_DATA) > _MAX_DATA:
        _DATA.popitem(last=False)
    event({"event": "prepared"})
    return data


def _fresh_outputs(task: Any) -> list[np.ndarray]:
    """Outputs pre-filled with NaN (or a sentinel) so elements a kernel never writes show up."""
    from ..dtype import dtype_info, is_float

    out = []
    for shape, dtype in task.arg_specs[task.num_inputs:]:
        np_dtype = np.dtype(dtype_info(dtype).numpy)
        fill = np.nan if is_float(dtype) else (True if np_dtype == np.bool_ else np.iinfo(np_dtype).max)
        out.append(np.full(shape, fill, dtype=np_dtype))
    return out


# -- inside the runner worker: checking --------------------------------------------------------
def tolerance(dtype: str, reduction: int, options: dict[str, Any]) -> tuple[float, float]:
    """(rtol, atol): exact for integers; for floats a base by precision, atol grown with the
    square root of the reduction length (rounding errors of a sum in another order grow so)."""
    base = _BASE_TOL.get(dtype, 0.0)
    rtol = options["rtol"] if options.get("rtol") is not None else base
    atol = options["atol"] if options.get("atol") is not None else base * math.sqrt(reduction)
    return float(rtol), float(atol)


def compare(name: str, got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str | None:
    """None when `got` matches; otherwise a one-line description with the max error. NaN or
    inf where the reference is finite is wrong."""
    if got.shape != want.shape:
        return f"output {name}: shape {got.shape}, reference {want.shape}"
    if got.dtype.kind in "fc":
        g, w = got.astype(np.float64), want.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(g - w)
            ok = (err <= atol + rtol * np.abs(w)) | (g == w) | (np.isnan(g) & np.isnan(w))
    else:
        g, w = got, want
        err = np.abs(got.astype(np.float64) - want.astype(np.float64))
        ok = got == want
    if ok.all():
        return None
    bad = ~ok
    worst = np.unravel_index(int(np.argmax(np.where(bad, np.nan_to_num(err, nan=np.inf), -1.0))), got.shape)
    nans = int(np.count_nonzero(np.isnan(g) & ~np.isnan(w))) if got.dtype.kind in "fc" else 0
    return (f"output {name}: {int(bad.sum())} of {got.size} elements wrong"
            f"{f' ({nans} NaN)' if nans else ''}; max abs error {float(err[worst]):.4g} at "
            f"{tuple(int(i) for i in worst)}: got {g[worst].item()!r}, expected {w[worst].item()!r} "
            f"(rtol={rtol:g}, atol={atol:g})")


# -- inside the runner worker: timing ----------------------------------------------------------
_FLUSH: np.ndarray | None = None


def _last_level_cache_bytes() -> int:
    sizes = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for entry in os.listdir(base):
            with open(os.path.join(base, entry, "size")) as f:
                text = f.read().strip().upper()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
            sizes.append(int(text.rstrip("KMG")) * scale)
    except (OSError, ValueError):
        pass
    return max(sizes, default=32 << 20)


def flush_cache() -> None:
    """Write every line of a buffer twice the last-level cache: the next call starts cold."""
    global _FLUSH
    if _FLUSH is None:
        _FLUSH = np.zeros(2 * _last_level_cache_bytes(), dtype=np.uint8)
    _FLUSH += 1


CLOCK_RESOLUTION_S = time.get_clock_info("perf_counter").resolution


def time_calls(fn: Callable[[], None], number: int, flush: bool) -> float:
    """Seconds of `number` calls; never below the clock's resolution (a cost of 0 is no measurement)."""
    if flush:
        flush_cache()
    clock = time.perf_counter
    t0 = clock()
    for _ in itertools.repeat(None, number):
        fn()
    return max(clock() - t0, CLOCK_RESOLUTION_S)


def measure_costs(fn: Callable[[], None], options: dict[str, Any],
                  timer: Callable[[Callable[[], None], int], float] | None = None) -> list[float]:
    """`repeat` per-call costs. Without a fixed `number`, it grows until one timing lasts
    `min_repeat_ms`, and that timing is the first cost. Each step at least doubles `number`,
    jumping towards the estimate from the last timing but by at most MAX_GROWTH: one fast
    call on a busy machine must not set up seconds-long timings. `timer(fn, number)` gives the
    seconds of `number` calls (default: the host clock, flushing the cache if asked)."""
    min_s = options["min_repeat_ms"] / 1000.0
    if timer is None:
        def timer(f: Callable[[], None], n: int) -> float:
            return time_calls(f, n, options["flush_cache"])
    costs: list[float] = []
    number = options["number"]
    if number is None:
        number = 1
        while True:
            seconds = timer(fn, number)
            if seconds >= min_s or number >= MAX_NUMBER:
                break
            estimate = number * min_s / max(seconds, 1e-9) * 1.1
            number = min(MAX_NUMBER, MAX_GROWTH * number, max(2 * number, math.ceil(estimate)))
        costs.append(seconds / number)
    while len(costs) < options["repeat"]:
        costs.append(timer(fn, number) / number)
    return costs


def handle_run(req: dict[str, Any], obj: bytes,
               event: Callable[[dict[str, Any]], None]) -> tuple[dict[str, Any], bytes]:
    """One candidate: load, check against the reference, warm up, time. Exceptions become
    RUNTIME_ERROR (the worker survives); a segfault or hang is the parent's to notice.
    run_seconds counts only the loops that call the kernel (check call, warm-up, timings)."""
    from ..codegen import load_module
    from ..codegen.module import NUM_THREADS_ENV

    if req["signature"].get("target_kind") == "cuda":
        from .cuda_runner import handle_cuda_run

        return handle_cuda_run(req, obj, event)
    os.environ[NUM_THREADS_ENV] = str(req["num_threads"])
    return run_candidate(req, event, lambda: load_module(req["signature"], obj))


def run_candidate(req: dict[str, Any], event: Callable[[dict[str, Any]], None], load: Callable[[], Any],
                  timer: Callable[[Callable[[], None], int], float] | None = None,
                  fatal: type[Exception] | tuple = ()) -> tuple[dict[str, Any], bytes]:
    """Load (`load()`), check and time one candidate; the reply the parent expects. An exception
    of a `fatal` type leaves the worker unusable: the reply asks for a fresh one ("restart")."""
    options = req["options"]
    try:
        task = task_of(req["task"])
        data = _prepare(task, options["check"], event)
    except Exception as exc:
        return run_reply(ErrorKind.RUNTIME_ERROR, f"preparing the task's inputs: {first_line(exc)}"), b""
    kernel_s = 0.0
    try:
        outputs = _fresh_outputs(task)
        fn = load().bind(*data.inputs, *outputs)
        t0 = time.perf_counter()
        fn()
        getattr(fn, "fetch", lambda: None)()      # a GPU kernel's outputs come back to the host
        kernel_s += time.perf_counter() - t0
        if options["check"]:
            wrong = _check_outputs(task, req["signature"], outputs, data, options)
            if wrong:
                return run_reply(ErrorKind.WRONG_RESULT, wrong, run_seconds=kernel_s), b""
        t0 = time.perf_counter()
        for _ in range(options["warmup"] - 1):
            fn()
        costs = measure_costs(fn, options, timer)
        kernel_s += time.perf_counter() - t0
    except fatal as exc:
        reply = run_reply(ErrorKind.RUNTIME_ERROR, first_line(exc), run_seconds=kernel_s)
        return {**reply, "restart": True}, b""
    except Exception as exc:
        return run_reply(ErrorKind.RUNTIME_ERROR, first_line(exc), run_seconds=kernel_s), b""
    return run_reply(ErrorKind.OK, "", costs, kernel_s), b""


def _check_outputs(task: Any, signature: dict[str, Any], outputs: list[np.ndarray], data: _TaskData,
                   options: dict[str, Any]) -> str | None:
    assert data.reference is not None
    names = [p["name"] for p in signature["params"]][task.num_inputs:]
    specs = task.arg_specs[task.num_inputs:]
    for name, got, want, (_, dtype) in zip(names, outputs, data.reference, specs):
        wrong = compare(name, got, want, *tolerance(dtype, data.reduction, options))
        if wrong:
            return wrong
    return None


def run_reply(kind: ErrorKind, msg: str, costs: list[float] | None = None, run_seconds: float = 0.0) -> dict[str, Any]:
    return {"error_kind": kind.value, "error_msg": msg, "costs": costs or [], "run_seconds": run_seconds}


# -- the parent's side --------------------------------------------------------------------------
class LocalRunner:
    """`run(inputs, build_results)` -> one MeasureResult per input, in order, measured one at a
    time in a single worker process that persists across calls."""

    def __init__(self, options: MeasureOptions | None = None) -> None:
        self.options = options or MeasureOptions()
        self._worker = WorkerHandle("run")      # imports while the first batch builds
        self._closed = False

    @property
    def pid(self) -> int:
        return self._worker.pid

    def run(self, inputs: list[MeasureInput], build_results: list[BuildResult]) -> list[MeasureResult]:
        if self._closed:
            raise RuntimeError("LocalRunner.run: the runner is closed")
        if len(inputs) != len(build_results):
            raise ValueError(f"LocalRunner.run: {len(inputs)} inputs but {len(build_results)} build results")
        out, task_json = [], {}
        for inp, built in zip(inputs, build_results):
            if not built.ok:
                out.append(MeasureResult((), built.error_kind, built.error_msg, built.build_seconds, time.time()))
                continue
            if id(inp.task) not in task_json:
                task_json[id(inp.task)] = inp.task.to_json()
            try:
                out.append(self._run_one(inp, built, task_json[id(inp.task)]))
            except BaseException:     # Ctrl-C: its answer would land in the next candidate's place
                self._replace()
                raise
        return out

    def _run_one(self, inp: MeasureInput, built: BuildResult, task_json: dict) -> MeasureResult:
        from ..codegen.module import num_threads

        def failed(kind: ErrorKind, msg: str) -> MeasureResult:
            return MeasureResult((), kind, msg, built.build_seconds, time.time())

        if not self._worker.alive:    # died while idle (killed from outside): not this candidate's fault
            self._replace()
        worker = self._worker
        worker.wait_ready()
        request = {"op": "run", "task": task_json, "config_index": inp.config_index,
                   "signature": built.signature, "options": self.options.to_json(),
                   "num_threads": num_threads()}
        limit = self.options.run_timeout_s
        deadline = time.monotonic() + limit
        try:
            worker.send(request, built.obj or b"")
            while True:
                if not worker.readable(deadline - time.monotonic()):
                    self._replace()
                    return failed(ErrorKind.TIMEOUT, f"config {inp.config_index} ran longer than {limit:g} s "
                                  "(runner worker killed)")
                header, _ = worker.recv()
                event = header.get("event")
                if event is None:
                    break
                # the task's data is made once, on its own clock
                deadline = time.monotonic() + (PREPARE_TIMEOUT_S if event == "preparing" else limit)
        except WorkerDied as exc:
            self._replace()
            return failed(ErrorKind.CRASH, f"runner worker {exc} while running config {inp.config_index}")
        if header.get("restart"):     # a GPU fault leaves the worker's CUDA context unusable
            self._replace()
        return MeasureResult(tuple(header.get("costs", ())), ErrorKind(header["error_kind"]),
                             header.get("error_msg", ""), built.build_seconds, time.time(),
                             float(header.get("run_seconds", 0.0)))

    def _replace(self) -> None:
        self._worker.kill()
        self._worker = WorkerHandle("run")

    def close(self) -> None:
        """Stop the worker (idempotent)."""
        self._closed = True
        self._worker.close()

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
