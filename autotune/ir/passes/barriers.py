"""Barriers: `__syncthreads()` wherever one thread of a block may read shared memory another
wrote, or overwrite what another still reads (TVM's storage sync, from a read/write analysis of
the shared buffers of each statement)."""
from __future__ import annotations

from ...te.expr import Call, Node
from ..functor import children, transform
from ..nodes import Buffer, Evaluate, For, ForKind, Load, Seq, Stmt, Store, seq

BARRIER = "syncthreads"


def barrier() -> Stmt:
    return Evaluate(Call(BARRIER, (), "int32"))


def is_barrier(s: Stmt) -> bool:
    return isinstance(s, Evaluate) and isinstance(s.value, Call) and s.value.fn == BARRIER


def shared_accesses(s: Stmt) -> tuple[set[Buffer], set[Buffer]]:
    """(read, written) shared buffers of `s`. A store that reads its own element (an accumulation,
    `P[t] = P[t] + x`) counts as a write only: a thread re-reading what it wrote needs no barrier."""
    reads: set[Buffer] = set()
    writes: set[Buffer] = set()

    def visit(n: Node, own: Buffer | None) -> None:
        if isinstance(n, Store):
            if n.buffer.scope == "shared":
                writes.add(n.buffer)
            for c in children(n):
                visit(c, n.buffer)
            return
        if isinstance(n, Load) and n.buffer.scope == "shared" and n.buffer is not own:
            reads.add(n.buffer)
        for c in children(n):
            visit(c, own)

    visit(s, None)
    return reads, writes


def _sync_seq(seq_node: Seq) -> Seq | None:
    """A barrier before each statement that reads shared memory written since the last barrier,
    or writes shared memory read since then (TVM's storage sync, one level at a time)."""
    out: list[Stmt] = []
    read: set[Buffer] = set()
    written: set[Buffer] = set()
    for c in seq_node.stmts:
        if is_barrier(c):
            read, written = set(), set()
        r, w = shared_accesses(c)
        if (r & written) or (w & read):
            out.append(barrier())
            read, written = set(), set()
        out.append(c)
        read |= r
        written |= w
    return Seq(tuple(out)) if len(out) != len(seq_node.stmts) else None


def _sync_loop(loop: For) -> For | None:
    """A barrier at the top of a loop whose iterations write shared memory that other statements
    of the loop read: the next iteration's writes wait for this iteration's reads."""
    if loop.kind is ForKind.THREAD_BOUND and loop.thread != "vthread":
        return None                   # not a loop in the kernel: one iteration per thread or block
    r, w = shared_accesses(loop.body)
    if not (r & w):
        return None
    return For(loop.var, loop.extent, loop.kind, seq(barrier(), loop.body), loop.thread)


def insert_barriers(body: Stmt) -> Stmt:
    """`__syncthreads()` wherever one thread may read or overwrite shared memory another thread
    wrote or reads: between dependent statements, and at the top of loops that refill a buffer."""

    def post(n: object) -> Stmt | None:
        if isinstance(n, Seq):
            return _sync_seq(n)
        if isinstance(n, For):
            return _sync_loop(n)
        return None

    return transform(body, post)
