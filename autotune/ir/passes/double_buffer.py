"""Double buffering: a shared buffer refilled at every iteration of its loop (`Stage.double_buffer`)
gets two copies, and the loop runs two iterations per step, each filling the copy the other does
not read:

    fill(0) -> X0
    for j: fill(2j+1) -> X1;  work(2j) on X0;  fill(2j+2) -> X0;  work(2j+1) on X1

The barrier pass then finds one barrier per iteration (before each fill of a copy that was just
read) instead of two, and a fill's global loads overlap the other copy's reads.
"""
from __future__ import annotations

from ...te.expr import Const, Expr, Var
from ..functor import replace_buffers, substitute, transform, written_buffers
from ..nodes import Allocate, Buffer, For, ForKind, IfThenElse, Seq, Stmt, seq


def _double(loop: For) -> Stmt | None:
    """The loop rewritten (see the module docstring), or None when it refills no doubled buffer."""
    allocs: list[Buffer] = []
    inner = loop.body
    while isinstance(inner, Allocate):
        allocs.append(inner.buffer)
        inner = inner.body
    ordered = [b for b in allocs if b.double_buffer and b.scope == "shared"]   # allocation order: same code every time
    doubled = set(ordered)
    if not doubled or not isinstance(inner, Seq):
        return None
    fills = [c for c in inner.stmts if written_buffers(c) & doubled]
    work = [c for c in inner.stmts if not written_buffers(c) & doubled]
    if list(inner.stmts[:len(fills)]) != fills:
        return None                   # a fill after the work: not the attach-loop shape
    copies = [{b: Buffer(f"{b.name}.{k}", b.shape, b.dtype, "shared") for b in ordered} for k in (0, 1)]
    n = loop.extent

    def at(stmts: list[Stmt], k: Expr, parity: int) -> Stmt:
        return replace_buffers(substitute(seq(*stmts), {loop.var: k}), copies[parity])

    def when(k: Expr, stmt: Stmt, needed: bool) -> Stmt:
        return IfThenElse(k < n, stmt) if needed else stmt

    j = Var(f"{loop.var.name}.pair", loop.var.dtype)
    k0, k1, k2 = j * 2, j * 2 + 1, j * 2 + 2
    step = seq(when(k1, at(fills, k1, 1), n % 2 == 1), at(work, k0, 0),
               when(k2, at(fills, k2, 0), True), when(k1, at(work, k1, 1), n % 2 == 1))
    for b in reversed(allocs):
        if b not in doubled:
            step = Allocate(b, step)
    out: Stmt = seq(at(fills, Const(0, loop.var.dtype), 0), For(j, (n + 1) // 2, loop.kind, step, loop.thread))
    for copy in (copies[0], copies[1]):
        for b in ordered:
            out = Allocate(copy[b], out)
    return out


def inject_double_buffers(body: Stmt) -> Stmt:
    """Every serial loop that refills a double-buffered shared stage, rewritten with two copies."""
    return transform(body, lambda n: _double(n) if isinstance(n, For) and n.kind is ForKind.SERIAL
                     and n.extent > 1 else None)
