"""A built CPU function: checks every argument, then calls the machine code through ctypes.

It comes from a PrimFunc compiled in this process, or from object code plus its JSON signature
(`from_object`), compiled elsewhere: a build worker, or an earlier run through a disk cache.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ..dtype import dtype_info
from ..errors import ArgumentError
from ..ir.nodes import PrimFunc
from ..target import Target, usable_cores
from . import jit
from .llvm import NUM_THREADS_SYMBOL, entry_symbol, status_error
from .sequence import NativeCall

NUM_THREADS_ENV = "AUTOTUNE_NUM_THREADS"
SIGNATURE_VERSION = 2  # 2: kernels return an i32 status (allocation failures)


def num_threads() -> int:
    """Threads for PARALLEL loops: $AUTOTUNE_NUM_THREADS, else every core (read at each call)."""
    text = os.environ.get(NUM_THREADS_ENV, "").strip()
    if not text:
        return usable_cores()
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{NUM_THREADS_ENV} must be a positive integer, got {text!r}")
    return n


class BuiltFunction:
    """`f(*arrays)` runs the kernel on numpy arrays given in the order of `func.params`.

    Outputs (`func.attrs["outputs"]`, param indices; default all) must be writeable. The
    machine code lives as long as this object. `func` is None for one loaded from object code.
    """

    def __init__(self, func: PrimFunc, compiled: jit.Compiled, ir_text: str):
        params = [(p.name, tuple(p.shape), p.dtype) for p in func.params]
        outputs = func.attrs.get("outputs", range(len(func.params)))
        self._setup(func.name, params, outputs, compiled, ir_text)
        self.func: PrimFunc | None = func
        self._signature: dict[str, Any] | None = None

    def _setup(self, name: str, params: list[tuple[str, tuple[int, ...], str]], outputs: Any,
               compiled: jit.Compiled, ir_text: str) -> None:
        self.name = name
        self._params = params
        self._compiled = compiled     # keeps the engine (and the code) alive
        self._ir_text = ir_text
        self._asm: str | None = None
        # the kernel returns 0, or the status of a failed heap allocation (llvm_abi.py)
        self._cfunc = ctypes.CFUNCTYPE(ctypes.c_int32, *[ctypes.c_void_p] * len(params))(compiled.address)
        self._threads = ctypes.c_int32.from_address(compiled.global_address(NUM_THREADS_SYMBOL))
        self._outputs = frozenset(outputs)
        self._expect = [(np.dtype(dtype_info(dtype).numpy), shape) for _, shape, dtype in params]

    @classmethod
    def from_object(cls, signature: dict[str, Any], obj: bytes) -> BuiltFunction:
        """Load object code made by `codegen.compile_object` (in any process on this host).

        Checks before LLVM sees the bytes (it crashes on bad ones): the signature's version,
        the object's hash, the target, and libgomp for code with parallel loops.
        """
        check_signature(signature, obj)
        params = [(p["name"], tuple(p["shape"]), p["dtype"]) for p in signature["params"]]
        self = cls.__new__(cls)
        self._setup(signature["name"], params, signature["outputs"],
                    jit.load_object(obj, signature["entry"]), "")
        self.func = None
        self._signature = dict(signature)
        return self

    def signature(self) -> dict[str, Any]:
        """The JSON description of the call (name, entry symbol, params, outputs, target);
        with the object's hash when loaded from object code."""
        if self._signature is not None:
            return dict(self._signature)
        assert self.func is not None
        return make_signature(self.func)

    def __call__(self, *arrays: np.ndarray) -> None:
        self.check(arrays)
        self._threads.value = num_threads()
        status = self._cfunc(*[a.ctypes.data for a in arrays])
        if status:
            raise self.status_error(status)

    def bind(self, *arrays: np.ndarray) -> Callable[[], None]:
        """Check `arrays` once and return a no-argument call on them, for timing loops where
        the per-call checks would be measured too. The call keeps the arrays alive."""
        self.check(arrays)
        pointers = [a.ctypes.data for a in arrays]
        cfunc, threads, error = self._cfunc, self._threads, self.status_error

        def run(_keep_alive: tuple = arrays) -> None:
            threads.value = num_threads()
            status = cfunc(*pointers)
            if status:
                raise error(status)
        return run

    def bind_free(self, *arrays: np.ndarray | None) -> Callable[..., None]:
        """`bind` for a call where some arrays change at every call (the Nones): the arrays given
        are checked once; the call returned takes the addresses of the others, in order, and does
        not check them. For a caller that made or checked them itself, as a model does its inputs
        and its fresh outputs: C-contiguous, aligned arrays of the parameters' dtypes and shapes,
        overlapping no argument the kernel writes."""
        self._check_fixed(arrays)
        free = [i for i, a in enumerate(arrays) if a is None]
        pointers = [0 if a is None else a.ctypes.data for a in arrays]
        cfunc, threads, error = self._cfunc, self._threads, self.status_error

        def run(*addresses: int, _keep_alive: tuple = arrays) -> None:
            args = pointers.copy()
            for i, address in zip(free, addresses):
                args[i] = address
            threads.value = num_threads()
            status = cfunc(*args)
            if status:
                raise error(status)
        return run

    def native_call(self, *arrays: np.ndarray | str) -> NativeCall:
        """This kernel's call for a `NativeSequence`: the arrays are checked once, as `bind_free`
        checks them, and passed by address; a name (str) stands for an array that changes at every
        call, which the caller makes or checks itself. The arrays must outlive the sequence."""
        self._check_fixed(tuple(None if isinstance(a, str) else a for a in arrays))
        return NativeCall(self._compiled.address, self._compiled.global_address(NUM_THREADS_SYMBOL),
                          tuple(a if isinstance(a, str) else a.ctypes.data for a in arrays))

    def status_error(self, status: int) -> Exception:
        """The exception for this kernel's nonzero return `status` (a failed heap allocation)."""
        return status_error(status, self._compiled.global_address, self.name)

    def _check_fixed(self, arrays: tuple[np.ndarray | None, ...]) -> None:
        """`check` of the arrays given, with an array of the right dtype and shape for each None."""
        check_count(self.name, [p[0] for p in self._params], arrays)
        self.check(tuple(np.empty(shape, dtype) if a is None else a for a, (dtype, shape) in zip(arrays, self._expect)))

    def check(self, arrays: tuple) -> None:
        """Raise ArgumentError (type, dtype, count) or ValueError (shape, layout, aliasing)
        naming the argument, before anything reaches ctypes."""
        params = self._params
        check_count(self.name, [p[0] for p in params], arrays)
        for pos, (a, (pname, _, _), (dtype, shape)) in enumerate(zip(arrays, params, self._expect)):
            what = f"argument {pos} ({pname})"
            if not isinstance(a, np.ndarray):
                raise ArgumentError(f"{what}: expected a numpy.ndarray, got {type(a).__name__}")
            check_host_array(a, what, dtype, shape, pos in self._outputs, self.name)
            flags = a.flags
            if not flags.c_contiguous:
                raise ValueError(f"{what}: expected a C-contiguous array, got strides {a.strides}; "
                                 "use np.ascontiguousarray")
            if not flags.aligned:
                raise ValueError(f"{what}: expected an array aligned to its {a.itemsize}-byte "
                                 "elements, got a misaligned one")
        for i in range(len(arrays)):
            for j in range(i + 1, len(arrays)):
                # every parameter is `noalias`, which only forbids overlap with memory the kernel writes;
                # C-contiguous arrays fill their address range, so overlapping ranges share memory
                written = i in self._outputs or j in self._outputs
                if written and np.may_share_memory(arrays[i], arrays[j]):
                    raise ValueError(f"argument {i} ({params[i][0]}) and argument {j} "
                                     f"({params[j][0]}) share memory; pass distinct arrays")

    def get_source(self, fmt: str = "ll") -> str:
        """"ll": the LLVM IR after O3; "ll-raw": as emitted, before optimization; "asm": host
        assembly of the optimized IR. None of them for a function loaded from object code."""
        if self.func is None and fmt in ("ll", "ll-raw", "asm", "s"):
            raise ValueError(f"get_source: {self.name} was loaded from object code, which keeps no "
                             "IR; build it from its schedule to see the source")
        if fmt == "ll":
            return self._compiled.optimized_ir
        if fmt == "ll-raw":
            return self._ir_text
        if fmt in ("asm", "s"):
            if self._asm is None:
                self._asm = jit.assembly(self._compiled.optimized_ir)
            return self._asm
        raise ValueError(f"get_source: unknown format {fmt!r}; expected 'll', 'll-raw' or 'asm'")

    def __repr__(self) -> str:
        return f"BuiltFunction({self.name}, params=({', '.join(p[0] for p in self._params)}))"


def check_count(owner: str, names: list[str], arrays: tuple) -> None:
    """ArgumentError unless there is one array per parameter."""
    if len(arrays) != len(names):
        raise ArgumentError(f"{owner} takes {len(names)} arrays ({', '.join(names)}), got {len(arrays)}")


def check_host_array(a: np.ndarray, what: str, dtype: np.dtype, shape: tuple[int, ...], written: bool,
                     owner: str) -> None:
    """ArgumentError (dtype) or ValueError (shape, a read-only output) naming the argument."""
    if a.dtype != dtype:
        raise ArgumentError(f"{what}: expected dtype {dtype.name}, got {a.dtype}")
    if a.shape != shape:
        raise ValueError(f"{what}: expected shape {shape}, got {a.shape}")
    if written and not a.flags.writeable:
        raise ValueError(f"{what}: is written by {owner} but the array is read-only")


def make_signature(func: PrimFunc, obj: bytes | None = None, openmp: bool | None = None) -> dict[str, Any]:
    """What loading `func`'s object code needs, as JSON; `obj` adds its hash. `openmp`: whether
    the code calls libgomp (default: whether this process could load it)."""
    sig: dict[str, Any] = {
        "version": SIGNATURE_VERSION,
        "name": func.name,
        "entry": entry_symbol(func),
        "params": [{"name": p.name, "shape": list(p.shape), "dtype": p.dtype} for p in func.params],
        "outputs": sorted(func.attrs.get("outputs", range(len(func.params)))),
        "target": Target.host().key,
        "openmp": jit.has_openmp() if openmp is None else bool(openmp),
    }
    if obj is not None:
        sig["object_sha256"] = hashlib.sha256(obj).hexdigest()
    return sig


def _built_for(signature: dict[str, Any]) -> Target:
    """The target a signature says its code was compiled for; ValueError when it says nothing readable."""
    try:
        return Target.from_key(signature["target"])
    except ValueError as exc:
        raise ValueError(f"object signature of {signature['name']!r}: {exc}") from None


def check_signature(signature: dict[str, Any], obj: bytes) -> None:
    """ValueError naming what does not fit: LLVM would crash (or abort the process) instead."""
    if not isinstance(signature, dict) or signature.get("version") != SIGNATURE_VERSION:
        got = signature.get("version") if isinstance(signature, dict) else type(signature).__name__
        raise ValueError(f"object signature: expected version {SIGNATURE_VERSION}, got {got!r}")
    missing = {"name", "entry", "params", "outputs", "target", "openmp", "object_sha256"} - set(signature)
    if missing:
        raise ValueError(f"object signature of {signature.get('name')!r}: missing {sorted(missing)}")
    digest = hashlib.sha256(bytes(obj)).hexdigest()
    if digest != signature["object_sha256"]:
        raise ValueError(f"object code of {signature['name']}: sha256 {digest[:12]}... does not match "
                         f"the signature's {str(signature['object_sha256'])[:12]}...; the bytes are damaged")
    here = Target.host()
    if not here.same_code(_built_for(signature)):
        raise ValueError(f"object code of {signature['name']} was compiled for {signature['target']!r}, "
                         f"this host is {here.key!r}")
    if signature["openmp"] and not jit.has_openmp():
        raise ValueError(f"object code of {signature['name']} calls libgomp, which this process could not load")
