"""A run request inside the runner worker: load a candidate, check its output, time it.

The request names the task's check data (`autotune.measure.check_data`): a directory of .npy
inputs and expected outputs that the parent wrote once per task, plus the output specs and the
tolerances. The worker reads them once (cached for a few tasks), pre-fills fresh outputs with NaN
(or a sentinel) so elements a kernel never writes show up, runs the candidate once and compares,
warms up, then takes `repeat` timings of `number` calls through `BuiltFunction.bind` (with
`cold_inputs`, calls taking turns over copies of the inputs; with `cold_weights`, of the
constant ones). A kernel split from its weight transforms comes with its prologue, which makes
the kernel's inputs from the task's once, untimed.
"""
from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...dtype import dtype_info, is_float
from ..types import ErrorKind
from ..wire import first_line, unpack_bundle
from .timing import MAX_SHARED_CACHE_BYTES, cold_copies, last_level_cache_bytes, measure_costs, taking_turns


@dataclass
class _TaskData:
    inputs: list[np.ndarray]
    expected: list[np.ndarray] | None


# the task's inputs and which of them are constants -> the kernel's inputs and their constants
Prepare = Callable[[list[np.ndarray], set[int]], tuple[list[np.ndarray], set[int]]]
_DATA: OrderedDict[str, _TaskData] = OrderedDict()
_MAX_DATA = 4


def _read_array(path: Path) -> np.ndarray:
    a = np.load(path, allow_pickle=False)
    a.flags.writeable = False         # shared by every candidate of the task
    return a


def load_check_data(spec: dict[str, Any], event: Callable[[dict[str, Any]], None]) -> _TaskData:
    """The arrays of `spec` (CheckData.to_json()), read once. The parent is told before and
    after a read, so reading never counts against a candidate's timeout."""
    key = f"{spec['directory']}:{spec['check']}"
    data = _DATA.get(key)
    if data is not None:
        _DATA.move_to_end(key)
        return data
    event({"event": "preparing"})
    root = Path(spec["directory"])
    inputs = [_read_array(root / f"input{i}.npy") for i in range(spec["num_inputs"])]
    expected = [_read_array(root / f"expected{i}.npy") for i in range(len(spec["outputs"]))] if spec["check"] else None
    data = _DATA[key] = _TaskData(inputs, expected)
    while len(_DATA) > _MAX_DATA:
        _DATA.popitem(last=False)
    event({"event": "prepared"})
    return data


def fresh_outputs(specs: list[dict[str, Any]]) -> list[np.ndarray]:
    """Outputs pre-filled with NaN (or a sentinel) so elements a kernel never writes show up."""
    out = []
    for spec in specs:
        np_dtype: np.dtype[Any] = np.dtype(dtype_info(spec["dtype"]).numpy)
        fill = np.nan if is_float(spec["dtype"]) else (True if np_dtype == np.bool_ else np.iinfo(np_dtype).max)
        out.append(np.full(tuple(spec["shape"]), fill, dtype=np_dtype))
    return out


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


def _check_outputs(signature: dict[str, Any], num_inputs: int, spec: dict[str, Any], outputs: list[np.ndarray],
                   expected: list[np.ndarray]) -> str | None:
    names = [p["name"] for p in signature["params"]][num_inputs:]
    for name, got, want, out in zip(names, outputs, expected, spec["outputs"]):
        wrong = compare(name, got, want, out["rtol"], out["atol"])
        if wrong:
            return wrong
    return None


def run_reply(kind: ErrorKind, msg: str, costs: list[float] | None = None, run_seconds: float = 0.0) -> dict[str, Any]:
    return {"error_kind": kind.value, "error_msg": msg, "costs": costs or [], "run_seconds": run_seconds}


def handle_run(req: dict[str, Any], obj: bytes,
               event: Callable[[dict[str, Any]], None]) -> tuple[dict[str, Any], bytes]:
    """One candidate: load, check against the expected outputs, warm up, time. Exceptions become
    RUNTIME_ERROR (the worker survives); a segfault or hang is the parent's to notice."""
    from ...codegen import load_module
    from ...codegen.module import NUM_THREADS_ENV

    if req["signature"].get("target_kind") == "cuda":
        from .cuda_run import handle_cuda_run

        return handle_cuda_run(req, obj, event)
    os.environ[NUM_THREADS_ENV] = str(req["num_threads"])
    hoisted = req["signature"].get("hoisted")
    if hoisted is None:
        return run_candidate(req, event, lambda: load_module(req["signature"], obj))
    bundle = unpack_bundle(obj)
    if bundle is None or len(bundle[1]) != 2:
        return run_reply(ErrorKind.RUNTIME_ERROR, "a hoisted kernel's object code is not a bundle of two"), b""
    kernel, prologue = bundle[1]
    signature = {k: v for k, v in req["signature"].items() if k != "hoisted"}

    def prepare(inputs: list[np.ndarray], constants: set[int]) -> tuple[list[np.ndarray], set[int]]:
        made = hoisted_inputs(hoisted, load_module(hoisted["prologue"], prologue), inputs)
        return made, hoisted_constants(hoisted["sources"], constants)

    return run_candidate(req, event, lambda: load_module(signature, kernel), prepare=prepare)


def hoisted_inputs(hoisted: dict[str, Any], prologue: Any, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """The inputs of a kernel split from its weight transforms: the prologue runs once on the
    task's constant inputs, and the kernel reads what it made in their place (the input map
    `sources`, as `autotune.ir.hoist.HoistPlan` gives it)."""
    specs = prologue.signature()["params"][len(hoisted["prologue_inputs"]):]
    made = [np.empty(tuple(p["shape"]), np.dtype(dtype_info(p["dtype"]).numpy)) for p in specs]
    prologue(*[inputs[i] for i in hoisted["prologue_inputs"]], *made)
    return [inputs[i] if kind == "input" else made[i] for kind, i in hoisted["sources"]]


def hoisted_constants(sources: list[list[Any]], constants: set[int]) -> set[int]:
    """The positions of a hoisted kernel's constant inputs: what its prologue made, and the
    task's constant inputs it still reads itself."""
    return {k for k, (kind, i) in enumerate(sources) if kind == "hoisted" or i in constants}


def _with_cold_inputs(built: Any, fn: Callable[[], None], inputs: list[np.ndarray], outputs: list[np.ndarray],
                      cold: set[int], cache_bytes: int | None = None) -> Callable[[], None]:
    """`fn` taking turns with calls on copies of the inputs at positions `cold` (the others
    shared), enough copies to outweigh `cache_bytes` twice (default: this machine's private
    caches, L2 times its cores)."""
    if cache_bytes is None:
        from ...target import Target

        facts = Target.parse("llvm").cpu
        cache_bytes = facts.l2_bytes * facts.cores
    copies = cold_copies(sum(a.nbytes for i, a in enumerate(inputs) if i in cold), cache_bytes)

    def copy() -> list[np.ndarray]:
        return [a.copy() if i in cold else a for i, a in enumerate(inputs)]

    return taking_turns([fn] + [built.bind(*copy(), *outputs) for _ in range(copies - 1)])


def _cold(fn: Callable[[], None], built: Any, inputs: list[np.ndarray], outputs: list[np.ndarray],
          constants: set[int], options: dict[str, Any]) -> Callable[[], None]:
    """`fn` as `MeasureOptions.cold_inputs` / `cold_weights` ask: every input out of the private
    caches, or the constant ones out of the shared cache too (a model's weights stream from
    memory: its other layers' weights passed through since)."""
    if options.get("cold_inputs"):
        return _with_cold_inputs(built, fn, inputs, outputs, set(range(len(inputs))))
    if options.get("cold_weights") and constants:
        shared = min(last_level_cache_bytes(), MAX_SHARED_CACHE_BYTES)
        return _with_cold_inputs(built, fn, inputs, outputs, constants, shared)
    return fn


def run_candidate(req: dict[str, Any], event: Callable[[dict[str, Any]], None], load: Callable[[], Any],
                  timer: Callable[[Callable[[], None], int], float] | None = None,
                  fatal: type[Exception] | tuple = (), prepare: Prepare | None = None) -> tuple[dict[str, Any], bytes]:
    """Load (`load()`), check and time one candidate; the reply the parent expects. An exception
    of a `fatal` type leaves the worker unusable: the reply asks for a fresh one ("restart").
    `prepare` makes the kernel's inputs from the task's, untimed (a hoisted kernel's prologue).
    run_seconds counts only the loops that call the kernel (check call, warm-up, timings)."""
    options, spec = req["options"], req["check"]
    try:
        data = load_check_data(spec, event)
    except Exception as exc:  # noqa: BLE001  (unreadable check data fails this candidate, not the worker)
        return run_reply(ErrorKind.RUNTIME_ERROR, f"reading the task's check data: {first_line(exc)}"), b""
    kernel_s = 0.0
    try:
        outputs = fresh_outputs(spec["outputs"])
        built = load()
        constants = set(spec.get("constant_inputs", ()))
        inputs = data.inputs
        if prepare:
            inputs, constants = prepare(inputs, constants)
        fn = built.bind(*inputs, *outputs)
        t0 = time.perf_counter()
        fn()
        getattr(fn, "fetch", lambda: None)()      # a GPU kernel's outputs come back to the host
        kernel_s += time.perf_counter() - t0
        if data.expected is not None:
            wrong = _check_outputs(req["signature"], len(inputs), spec, outputs, data.expected)
            if wrong:
                return run_reply(ErrorKind.WRONG_RESULT, wrong, run_seconds=kernel_s), b""
        fn = _cold(fn, built, inputs, outputs, constants, options)
        t0 = time.perf_counter()
        for _ in range(options["warmup"] - 1):
            fn()
        costs = measure_costs(fn, options, timer)
        kernel_s += time.perf_counter() - t0
    except fatal as exc:
        reply = run_reply(ErrorKind.RUNTIME_ERROR, first_line(exc), run_seconds=kernel_s)
        return {**reply, "restart": True}, b""
    except Exception as exc:  # noqa: BLE001  (a kernel failure of any kind fails this candidate, not the worker)
        return run_reply(ErrorKind.RUNTIME_ERROR, first_line(exc), run_seconds=kernel_s), b""
    return run_reply(ErrorKind.OK, "", costs, kernel_s), b""
