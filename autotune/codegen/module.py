"""A built CPU function: checks every argument, then calls the machine code through ctypes."""
from __future__ import annotations

import ctypes
import functools
import os
from typing import Callable

import numpy as np

from ..dtype import dtype_info
from ..errors import ArgumentError
from ..ir.nodes import PrimFunc
from . import jit
from .llvm import NUM_THREADS_SYMBOL

NUM_THREADS_ENV = "AUTOTUNE_NUM_THREADS"


@functools.cache
def _cores() -> int:
    """The cores this process may run on (its affinity mask, which a container or taskset can
    narrow below os.cpu_count()); looked up once, since it is slow on some systems."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def num_threads() -> int:
    """Threads for PARALLEL loops: $AUTOTUNE_NUM_THREADS, else every core (read at each call)."""
    text = os.environ.get(NUM_THREADS_ENV, "").strip()
    if not text:
        return _cores()
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
    machine code lives as long as this object.
    """

    def __init__(self, func: PrimFunc, compiled: jit.Compiled, ir_text: str):
        self.func = func
        self.name = func.name
        self._compiled = compiled     # keeps the engine (and the code) alive
        self._ir_text = ir_text
        self._asm: str | None = None
        self._cfunc = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(func.params))(compiled.address)
        self._threads = ctypes.c_int32.from_address(compiled.global_address(NUM_THREADS_SYMBOL))
        self._outputs = frozenset(func.attrs.get("outputs", range(len(func.params))))
        self._expect = [(np.dtype(dtype_info(p.dtype).numpy), tuple(p.shape)) for p in func.params]

    def __call__(self, *arrays: np.ndarray) -> None:
        self.check(arrays)
        self._threads.value = num_threads()
        self._cfunc(*[a.ctypes.data for a in arrays])

    def bind(self, *arrays: np.ndarray) -> Callable[[], None]:
        """Check `arrays` once and return a no-argument call on them, for timing loops where
        the per-call checks would be measured too. The call keeps the arrays alive."""
        self.check(arrays)
        pointers = [a.ctypes.data for a in arrays]
        cfunc, threads = self._cfunc, self._threads

        def run(_keep_alive: tuple = arrays) -> None:
            threads.value = num_threads()
            cfunc(*pointers)
        return run

    def check(self, arrays: tuple) -> None:
        """Raise ArgumentError (type, dtype, count) or ValueError (shape, layout, aliasing)
        naming the argument, before anything reaches ctypes."""
        params = self.func.params
        if len(arrays) != len(params):
            names = ", ".join(p.name for p in params)
            raise ArgumentError(f"{self.name} takes {len(params)} arrays ({names}), got {len(arrays)}")
        for pos, (a, p, (dtype, shape)) in enumerate(zip(arrays, params, self._expect)):
            what = f"argument {pos} ({p.name})"
            if not isinstance(a, np.ndarray):
                raise ArgumentError(f"{what}: expected a numpy.ndarray, got {type(a).__name__}")
            if a.dtype != dtype:
                raise ArgumentError(f"{what}: expected dtype {p.dtype}, got {a.dtype}")
            if a.shape != shape:
                raise ValueError(f"{what}: expected shape {shape}, got {a.shape}")
            if not a.flags.c_contiguous:
                raise ValueError(f"{what}: expected a C-contiguous array, got strides {a.strides}; "
                                 "use np.ascontiguousarray")
            if not a.flags.aligned:
                raise ValueError(f"{what}: expected an array aligned to its {a.itemsize}-byte "
                                 "elements, got a misaligned one")
            if pos in self._outputs and not a.flags.writeable:
                raise ValueError(f"{what}: is written by {self.name} but the array is read-only")
        for i in range(len(arrays)):
            for j in range(i + 1, len(arrays)):
                if np.shares_memory(arrays[i], arrays[j]):
                    raise ValueError(f"argument {i} ({params[i].name}) and argument {j} "
                                     f"({params[j].name}) share memory; pass distinct arrays")

    def get_source(self, fmt: str = "ll") -> str:
        """"ll": the LLVM IR after O3; "ll-raw": as emitted, before optimization; "asm": host
        assembly of the optimized IR."""
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
        return f"BuiltFunction({self.name}, params=({', '.join(p.name for p in self.func.params)}))"
