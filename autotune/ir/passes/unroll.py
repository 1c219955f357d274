"""Unroll: an UNROLLED loop becomes `extent` copies of its body with the variable a constant."""
from __future__ import annotations

from ...errors import ScheduleError
from ...te.expr import Const
from ...te.traversal import substitute, transform
from ..nodes import For, ForKind, Stmt, seq

MAX_UNROLL = 256  # beyond this the code size, not the loop overhead, dominates


def unroll_loop(loop: For) -> Stmt:
    if loop.extent > MAX_UNROLL:
        raise ScheduleError(f"unroll of loop {loop.var.name}: extent {loop.extent} > {MAX_UNROLL}; split it first")
    return seq(*(substitute(loop.body, {loop.var: Const(i, loop.var.dtype)}) for i in range(loop.extent)))


def unroll_loops(s: Stmt) -> Stmt:
    """Unroll every UNROLLED loop (innermost first)."""
    return transform(s, lambda n: unroll_loop(n) if isinstance(n, For) and n.kind is ForKind.UNROLLED else None)
