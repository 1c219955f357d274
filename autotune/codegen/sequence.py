"""Compiled kernels called in order from one native function: a model's call with no Python
between its kernels, as TVM's AOT executor replaces the graph executor's interpreter loop.

From Python, every kernel call pays ctypes and argument marshalling: a few microseconds, as much
as a small kernel runs (an MLP at batch 1 spent half its call there). `NativeSequence` emits one
LLVM function that, for each kernel in turn, stores the thread count into the kernel's module and
calls its machine code at its address: fixed arguments (weights, the arena) are constants, the
per-call ones (the model's inputs and fresh outputs) come from the function's own parameters. It
stops at the first kernel that returns a nonzero status and reports which one.
"""
from __future__ import annotations

import ctypes
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llvmlite import binding as llvm, ir

from . import jit
from .llvm_helpers import I32, PTR

_I64 = ir.IntType(64)
_ENTRY = "autotune_sequence"
_SEQUENCES = itertools.count()      # each sequence's kernels get symbols of their own


@dataclass(frozen=True)
class NativeCall:
    """One kernel's call: its entry address, the address of its module's thread-count global,
    and each argument: a fixed address (int) or the name of a per-call array (str)."""

    address: int
    threads_address: int
    args: tuple[int | str, ...]


class NativeSequence:
    """`seq(addresses, threads)` runs every call in order; `addresses` are the per-call arrays'
    data addresses in the order of `names`. Returns None, or (call index, status) of the first
    call that failed (the calls after it did not run). `keep` holds what owns the code."""

    def __init__(self, calls: Sequence[NativeCall], keep: Any = None) -> None:
        self.names = tuple(dict.fromkeys(a for c in calls for a in c.args if isinstance(a, str)))
        prefix = f"autotune_sequence{next(_SEQUENCES)}_kernel"
        for index, call in enumerate(calls):       # MCJIT resolves the declared kernels to their code
            llvm.add_symbol(f"{prefix}{index}", call.address)
        self._compiled = jit.compile_ir(str(_emit(calls, self.names, prefix)), _ENTRY)
        self._cfunc = ctypes.CFUNCTYPE(ctypes.c_int64, *[ctypes.c_void_p] * len(self.names),
                                       ctypes.c_int32)(self._compiled.address)
        self._keep = keep

    def __call__(self, addresses: Sequence[int], threads: int) -> tuple[int, int] | None:
        result = self._cfunc(*addresses, threads)
        if not result:
            return None
        return (result >> 32) - 1, ctypes.c_int32(result & 0xFFFFFFFF).value


def _emit(calls: Sequence[NativeCall], names: tuple[str, ...], prefix: str) -> ir.Module:
    """i64 autotune_sequence(ptr per-call arrays..., i32 threads): 0, or (index + 1) << 32 | the
    status of the first failing call. Kernel i is the external function `{prefix}{i}`."""
    module = ir.Module(name="sequence")
    module.triple, module.data_layout = jit.triple_and_layout()
    fn = ir.Function(module, ir.FunctionType(_I64, [PTR] * len(names) + [I32]), _ENTRY)
    params = dict(zip(names, fn.args))
    threads = fn.args[-1]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    for index, call in enumerate(calls):
        b.store(threads, ir.Constant(_I64, call.threads_address).inttoptr(PTR))
        kernel = ir.Function(module, ir.FunctionType(I32, [PTR] * len(call.args)), f"{prefix}{index}")
        args = [params[a] if isinstance(a, str) else ir.Constant(_I64, a).inttoptr(PTR) for a in call.args]
        status = b.call(kernel, args)
        failed = b.icmp_signed("!=", status, ir.Constant(I32, 0))
        with b.if_then(failed, likely=False):
            code = b.or_(ir.Constant(_I64, (index + 1) << 32), b.zext(status, _I64))
            b.ret(code)
    b.ret(ir.Constant(_I64, 0))
    return module
