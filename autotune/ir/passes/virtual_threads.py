"""Virtual threads: vthread loops moved down to the statements that depend on them (TVM's
InjectVirtualThread), so the work they share runs once per real thread."""
from __future__ import annotations

from ...te.expr import Var
from ..functor import replace_buffers, transform, uses_var, written_buffers
from ..nodes import Allocate, Buffer, For, ForKind, IfThenElse, Let, Seq, Stmt, seq


def _push_vthread(v: Var, n: int, s: Stmt, own: frozenset[Buffer] = frozenset()) -> Stmt:
    """`for v in vthread(n): s` with the loop moved down to the statements that depend on v.
    `own`: the local buffers this virtual thread has its own slice of."""
    loop = For(v, n, ForKind.THREAD_BOUND, s, "vthread")
    if not uses_var(s, v):
        return s                      # the same work for every virtual thread: done once
    if isinstance(s, Allocate):
        if s.buffer.scope != "local":
            return Allocate(s.buffer, _push_vthread(v, n, s.body, own))
        b = s.buffer                  # n copies, virtual thread v's slice of them at v * size
        new = Buffer(b.name, (n * b.size,), b.dtype, b.scope)
        return Allocate(new, _push_vthread(v, n, replace_buffers(s.body, {b: new}, v * b.size), own | {new}))
    if isinstance(s, Seq):
        if any(b.scope == "local" and b not in own for b in written_buffers(s)):
            # a local buffer allocated outside: one copy for all, keep each virtual thread's use whole
            return loop
        return seq(*(_push_vthread(v, n, c, own) for c in s.stmts))
    if isinstance(s, For):
        return For(s.var, s.extent, s.kind, _push_vthread(v, n, s.body, own), s.thread)
    if isinstance(s, IfThenElse) and not uses_var(s.cond, v):
        other = None if s.else_case is None else _push_vthread(v, n, s.else_case, own)
        return IfThenElse(s.cond, _push_vthread(v, n, s.then_case, own), other)
    if isinstance(s, Let) and not uses_var(s.value, v):
        return Let(s.var, s.value, _push_vthread(v, n, s.body, own))
    return loop


def inject_virtual_threads(body: Stmt) -> Stmt:
    """vthread loops moved down to the statements that depend on them (TVM's InjectVirtualThread).

    Virtual threads are independent like real ones, so their work may be reordered: a shared tile
    the block fetches (bound inference relaxes it over vthreads) is fetched once instead of once
    per virtual thread, each virtual thread gets its slice of the local buffers allocated inside,
    and the innermost statements carry the (unrolled) vthread loops: one thread computes several
    strided sub-tiles, which spreads its shared-memory reads over the banks."""

    def post(s: object) -> Stmt | None:
        if isinstance(s, For) and s.kind is ForKind.THREAD_BOUND and s.thread == "vthread":
            return _push_vthread(s.var, s.extent, s.body)
        return None

    return transform(body, post)
