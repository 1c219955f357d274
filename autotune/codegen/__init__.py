"""CPU code generation: lowered PrimFunc -> LLVM IR -> host machine code -> callable.

`build_module(func)` is the whole path; `target_key()` names this host for the tuning database.
"""
from __future__ import annotations

from ..ir.nodes import PrimFunc
from . import jit
from .jit import target_key
from .llvm import emit_module, entry_symbol
from .module import BuiltFunction

__all__ = ["build_module", "target_key", "BuiltFunction"]


def build_module(func: PrimFunc) -> BuiltFunction:
    """Compile `func` for the host CPU (O3) and wrap it as a checked numpy-callable function."""
    triple, layout = jit.triple_and_layout()
    ir_text = str(emit_module(func, parallel=jit.has_openmp(), triple=triple, data_layout=layout))
    return BuiltFunction(func, jit.compile_ir(ir_text, entry_symbol(func)), ir_text)
