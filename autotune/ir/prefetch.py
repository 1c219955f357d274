"""The Prefetch statements of `Stage.prefetch` (TVM's prefetch + InjectPrefetch in one step).

At the top of an iteration of loop `var`, the loop's body is about to read a region of a
buffer; the statements fetch the region the body reads `offset` iterations later. The region of
one load is its index over the loops inside the body: from every inner loop at 0 to every one at
its last value, when that span is a constant (an affine index); then one Prefetch per cache line
of it, at most MAX_LINES. Otherwise only the line at the region's start is fetched.
"""
from __future__ import annotations

from ..dtype import dtype_info
from ..errors import ScheduleError
from ..te.expr import Const, Expr, Var
from ..te.traversal import substitute, walk
from .functor import free_vars
from .nodes import Buffer, For, Let, Load, Prefetch, Stmt
from .passes.simplify import simplify_expr

CACHE_LINE_BYTES = 64
MAX_LINES = 8       # per load and iteration: beyond it the fetches crowd out the loop's own loads


def prefetches(body: Stmt, buf: Buffer, var: Var, offset: int, where: str) -> list[Stmt]:
    """The Prefetch statements of `buf` for an iteration of loop `var` whose body is `body`.
    ScheduleError (naming `where`) when the body does not read `buf`."""
    inner: dict[Var, int] = {}
    bound: set[Var] = set()
    indices: list[Expr] = []

    def visit(n: object) -> None:
        if isinstance(n, For):
            inner[n.var] = n.extent
        elif isinstance(n, Let):
            bound.add(n.var)
        elif isinstance(n, Load) and n.buffer is buf:
            indices.append(n.index)

    walk(body, visit)
    if not indices:
        raise ScheduleError(f"{where}: the loop does not read {buf.name}; prefetch a tensor read inside it")
    ahead = {var: var + Const(offset, var.dtype)}
    line = max(1, CACHE_LINE_BYTES // dtype_info(buf.dtype).bytes)
    out: dict[str, Stmt] = {}
    for index in indices:
        if free_vars(index) & bound:
            continue                        # depends on a value computed inside the body
        shifted = substitute(index, ahead)
        first = simplify_expr(substitute(shifted, {v: Const(0, v.dtype) for v in inner}))
        last = simplify_expr(substitute(shifted, {v: Const(e - 1, v.dtype) for v, e in inner.items()}))
        span = simplify_expr(last - first)
        count = min(MAX_LINES, int(span.value) // line + 1) if isinstance(span, Const) and span.value >= 0 else 1
        for k in range(count):
            at = simplify_expr(first + Const(k * line, first.dtype)) if k else first
            out.setdefault(str(at), Prefetch(buf, at))
    return list(out.values())
