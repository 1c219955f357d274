"""The contract between a generated kernel and its caller (`module.py`).

The kernel is `i32 <entry_symbol>(T0* noalias p0, T1* noalias p1, ...)`, one pointer per
parameter buffer. It returns 0, or k > 0 when the k-th heap buffer of its module could not be
allocated (after freeing the others: nothing leaks). Two globals go with it: the thread count
for parallel loops (NUM_THREADS_SYMBOL, i32, set by the caller before each call) and a JSON
table of the heap buffers, [[name, bytes], ...] (HEAP_TABLE_SYMBOL, a C string), from which
`status_error` names the buffer. Both are read through the symbol table, so object code loaded
in another process works the same.
"""
from __future__ import annotations

import ctypes
import json
from collections.abc import Callable

from llvmlite import ir

from ..ir.nodes import PrimFunc
from .llvm_helpers import I8

NUM_THREADS_SYMBOL = "__autotune_num_threads"
HEAP_TABLE_SYMBOL = "__autotune_heap_buffers"
# symbols the generated code defines or calls, which the kernel's own name must not shadow
RESERVED_NAMES = frozenset({NUM_THREADS_SYMBOL, HEAP_TABLE_SYMBOL, "GOMP_parallel", "omp_get_thread_num",
                            "omp_get_num_threads", "aligned_alloc", "free", "erf"})


def entry_symbol(func: PrimFunc) -> str:
    """The kernel's symbol: its name, unless that is a function the generated code calls."""
    name = func.name
    return f"{name}__kernel" if name in RESERVED_NAMES or name.startswith("llvm.") else name


def define_heap_table(module: ir.Module, table: list[tuple[str, int]]) -> None:
    """Export [(buffer name, bytes), ...] as HEAP_TABLE_SYMBOL; status k names table[k - 1]."""
    text = bytearray(json.dumps(table).encode() + b"\0")
    var = ir.GlobalVariable(module, ir.ArrayType(I8, len(text)), HEAP_TABLE_SYMBOL)
    var.global_constant = True
    var.initializer = ir.Constant(var.value_type, text)


def status_error(status: int, global_address: Callable[[str], int], kernel: str) -> Exception:
    """The exception for a nonzero return `status` of kernel `kernel`; `global_address` looks
    up a symbol of its compiled module (to read the heap-buffer table)."""
    address = global_address(HEAP_TABLE_SYMBOL)
    table = json.loads(ctypes.string_at(address).decode()) if address else []
    if not 0 < status <= len(table):
        return RuntimeError(f"{kernel} returned the unknown status {status}")
    name, nbytes = table[status - 1]
    return MemoryError(f"{kernel}: could not allocate {nbytes} bytes for buffer {name} "
                       "(aligned_alloc returned NULL)")
