"""CPU code generation: lowered PrimFunc -> LLVM IR -> host machine code -> callable.

`build_module(func)` is the whole path in one process; `compile_object(func)` stops at
relocatable object code plus a JSON signature, which `load_module` turns into the same callable
in another process (measurement workers, the kernel cache).
"""
from __future__ import annotations

from typing import Any

from ..ir.nodes import PrimFunc
from ..target import Target
from . import jit
from .llvm import emit_module, entry_symbol
from .module import BuiltFunction, make_signature

__all__ = ["BuiltFunction", "build_module", "compile_for", "compile_object", "load_compiled", "load_module"]


def _ir_text(func: PrimFunc) -> str:
    triple, layout = jit.triple_and_layout()
    return str(emit_module(func, parallel=jit.has_openmp(), triple=triple, data_layout=layout,
                           masked_tails=jit.masked_vectors(),
                           vector_registers=Target.parse("llvm").cpu.vector_registers))


def build_module(func: PrimFunc) -> BuiltFunction:
    """Compile `func` for the host CPU (O3) and wrap it as a checked numpy-callable function."""
    ir_text = _ir_text(func)
    return BuiltFunction(func, jit.compile_ir(ir_text, entry_symbol(func)), ir_text)


def compile_object(func: PrimFunc) -> tuple[dict[str, Any], bytes]:
    """`func` as host object code (O3) and the JSON signature `load_module` needs with it."""
    ir_text = _ir_text(func)
    obj = jit.emit_object(ir_text, entry_symbol(func))
    return make_signature(func, obj, openmp="GOMP_parallel" in ir_text), obj


def load_module(signature: dict[str, Any], obj: bytes) -> BuiltFunction:
    """The callable of object code from `compile_object` (checked: hash, target, libgomp)."""
    return BuiltFunction.from_object(signature, obj)


def compile_for(func: PrimFunc, target: Target) -> tuple[dict[str, Any], bytes]:
    """`func` compiled for `target`: host object code, or a cubin for its arch (nvcc only: no GPU
    needed when the target names its arch). `load_compiled` turns the result into a callable."""
    if target.kind == "cuda":
        from .cuda_module import compile_kernel

        arch = target.resolved().arch
        assert arch is not None   # resolved() fills in the arch of a cuda target
        return compile_kernel(func, arch)
    return compile_object(func)


def load_compiled(signature: dict[str, Any], data: bytes) -> Any:
    """The callable of `compile_for`'s output: a BuiltFunction, or a CudaFunction on the GPU."""
    if signature.get("target_kind") == "cuda":
        from .cuda_module import CudaFunction

        return CudaFunction(signature, data)
    return load_module(signature, data)
