"""GPU passes: the launch shape a kernel's bound loops imply (checked against the device's
limits) and `__syncthreads()` barriers around the nests that fill shared memory.

A lowered CUDA kernel is one root nest whose outer loops are bound to blockIdx; inside, loops
bound to threadIdx run across the block's threads and every other loop runs in each thread.
Read serially (every bound loop an ordinary loop), the IR computes the same values: that is
how CUDA schedules are checked on a machine without a GPU (`autotune.testing.serialize_threads`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import ScheduleError
from ...te.expr import Call, Expr, Var
from ..functor import children, transform, uses_var, walk
from ..nodes import (Allocate, Buffer, Evaluate, For, ForKind, IfThenElse, Let, Load, PrimFunc, Seq, Stmt, Store,
                     ThreadAllReduce, seq)

BARRIER = "syncthreads"
MAX_THREADS_PER_BLOCK = 1024
MAX_BLOCK_DIM = {"x": 1024, "y": 1024, "z": 64}
MAX_GRID_DIM = {"x": 2**31 - 1, "y": 65535, "z": 65535}
SHARED_BYTES_LIMIT = 48 * 1024      # static __shared__ per block on every CUDA GPU since sm_20


def barrier() -> Stmt:
    return Evaluate(Call(BARRIER, (), "int32"))


def is_barrier(s: Stmt) -> bool:
    return isinstance(s, Evaluate) and isinstance(s.value, Call) and s.value.fn == BARRIER


@dataclass(frozen=True)
class LaunchShape:
    """Grid and block dimensions (x, y, z) and the static shared memory of one kernel launch."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int

    @property
    def threads(self) -> int:
        return math.prod(self.block)

    def to_json(self) -> dict:
        return {"grid": list(self.grid), "block": list(self.block), "shared_bytes": self.shared_bytes}


def _root_nest(func: PrimFunc) -> For:
    body = func.body
    while isinstance(body, Allocate) and body.buffer.scope in ("shared", "local"):
        body = body.body
    if isinstance(body, Allocate):
        raise ScheduleError(f"{func.name}: intermediate {body.buffer.name} is computed at root, which a CUDA "
                            "kernel cannot do (no grid-wide barrier); compute_at or compute_inline it")
    if isinstance(body, Seq):
        raise ScheduleError(f"{func.name}: a CUDA kernel is one root loop nest, found {len(body.stmts)}; "
                            "compute_at or compute_inline every producer")
    if not (isinstance(body, For) and body.kind is ForKind.THREAD_BOUND and body.thread.startswith("blockIdx")):
        raise ScheduleError(f"{func.name}: the outermost loop of a CUDA kernel must be bound to blockIdx "
                            "(s[T].bind(axis, te.thread_axis('blockIdx.x')))")
    return body


def _bound_extents(func: PrimFunc) -> dict[str, int]:
    """The largest extent of each bound tag, checking that blocks enclose threads."""
    dims: dict[str, int] = {}

    def visit(s: Stmt, inside_thread: str | None) -> None:
        if isinstance(s, For) and s.kind is ForKind.THREAD_BOUND and s.thread != "vthread":
            if s.thread.startswith("blockIdx") and inside_thread is not None:
                raise ScheduleError(f"{func.name}: loop {s.var.name} is bound to {s.thread} inside loop bound to "
                                    f"{inside_thread}; bind block indices outside thread indices")
            dims[s.thread] = max(dims.get(s.thread, 1), s.extent)
            inside_thread = s.thread if s.thread.startswith("threadIdx") else inside_thread
        for c in _stmt_children(s):
            visit(c, inside_thread)

    visit(func.body, None)
    return dims


def _stmt_children(s: Stmt) -> list[Stmt]:
    if isinstance(s, (For, Allocate)):
        return [s.body]
    if isinstance(s, IfThenElse):
        return [s.then_case] + ([s.else_case] if s.else_case is not None else [])
    if isinstance(s, Seq):
        return list(s.stmts)
    if isinstance(s, Let):
        return [s.body]
    return []


def shared_bytes(func: PrimFunc) -> int:
    from ...dtype import dtype_info

    total = 0

    def add(n: object) -> None:
        nonlocal total
        if isinstance(n, Allocate) and n.buffer.scope == "shared":
            total += n.buffer.size * dtype_info(n.buffer.dtype).bytes
    walk(func.body, add)
    return total


def allreduce_warps(block: tuple[int, ...]) -> int:
    """Warps per row of threadIdx.x whose partial results an all-reduce exchanges through shared
    memory (0 when the row fits in one warp and shuffles alone suffice)."""
    return block[0] // 32 if block[0] > 32 else 0


def _allreduce_scratch_bytes(func: PrimFunc, block: tuple[int, ...]) -> int:
    from ...dtype import dtype_info

    reduces: list[ThreadAllReduce] = []
    walk(func.body, lambda n: reduces.append(n) if isinstance(n, ThreadAllReduce) else None)
    if reduces and block[0] & (block[0] - 1):
        raise ScheduleError(f"{func.name}: a reduction across threadIdx.x needs a power-of-two block width, "
                            f"got {block[0]}")
    rows = block[1] * block[2] * allreduce_warps(block)
    return sum(rows * dtype_info(r.buffer.dtype).bytes for r in reduces)


def launch_shape(func: PrimFunc, shared_limit: int = SHARED_BYTES_LIMIT) -> LaunchShape:
    """The launch a kernel needs; ScheduleError for a binding no GPU can run, before compiling."""
    _root_nest(func)
    dims = _bound_extents(func)
    for tag, n in dims.items():
        prefix, axis = tag.split(".")
        limit = (MAX_BLOCK_DIM if prefix == "threadIdx" else MAX_GRID_DIM)[axis]
        if n > limit:
            raise ScheduleError(f"{func.name}: {tag} has extent {n}, over the limit {limit}")
    block = tuple(dims.get(f"threadIdx.{a}", 1) for a in "xyz")
    grid = tuple(dims.get(f"blockIdx.{a}", 1) for a in "xyz")
    if math.prod(block) > MAX_THREADS_PER_BLOCK:
        raise ScheduleError(f"{func.name}: {math.prod(block)} threads per block (block {block}), over the "
                            f"limit {MAX_THREADS_PER_BLOCK}")
    smem = shared_bytes(func) + _allreduce_scratch_bytes(func, block)
    if smem > shared_limit:
        raise ScheduleError(f"{func.name}: {smem} bytes of shared memory per block, over the limit {shared_limit}")
    return LaunchShape(grid, block, smem)  # type: ignore[arg-type]


# -- virtual threads -------------------------------------------------------------------------------
def _uses(s: object, v: Var) -> bool:
    return uses_var(s, v)  # type: ignore[arg-type]


def _expand_local(body: Stmt, old: Buffer, new: Buffer, v: Var) -> Stmt:
    """Accesses of `old` moved to virtual thread v's slice of `new` (n copies of `old`)."""
    offset = v * old.size

    def post(n: object) -> object | None:
        if isinstance(n, Load) and n.buffer is old:
            return Load(new, offset + n.index, n.predicate)
        if isinstance(n, Store) and n.buffer is old:
            return Store(new, offset + n.index, n.value, n.predicate)
        return None
    return transform(body, post)


def _writes_local(s: Stmt, own: frozenset[Buffer]) -> bool:
    """Whether `s` writes a local buffer allocated outside the virtual thread (one copy for all)."""
    found: list[bool] = []
    walk(s, lambda n: found.append(True) if isinstance(n, Store) and n.buffer.scope == "local"
         and n.buffer not in own else None)
    return bool(found)


def _push_vthread(v: Var, n: int, s: Stmt, own: frozenset[Buffer] = frozenset()) -> Stmt:
    """`for v in vthread(n): s` with the loop moved down to the statements that depend on v.
    `own`: the local buffers this virtual thread has its own slice of."""
    loop = For(v, n, ForKind.THREAD_BOUND, s, "vthread")
    if not _uses(s, v):
        return s                      # the same work for every virtual thread: done once
    if isinstance(s, Allocate):
        if s.buffer.scope != "local":
            return Allocate(s.buffer, _push_vthread(v, n, s.body, own))
        b = s.buffer
        new = Buffer(b.name, (n * b.size,), b.dtype, b.scope)
        return Allocate(new, _push_vthread(v, n, _expand_local(s.body, b, new, v), own | {new}))
    if isinstance(s, Seq):
        if _writes_local(s, own):     # shared per-thread scratch: keep each virtual thread's use whole
            return loop
        return seq(*(_push_vthread(v, n, c, own) for c in s.stmts))
    if isinstance(s, For):
        return For(s.var, s.extent, s.kind, _push_vthread(v, n, s.body, own), s.thread)
    if isinstance(s, IfThenElse) and not _uses(s.cond, v):
        other = None if s.else_case is None else _push_vthread(v, n, s.else_case, own)
        return IfThenElse(s.cond, _push_vthread(v, n, s.then_case, own), other)
    if isinstance(s, Let) and not _uses(s.value, v):
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


# -- barriers -------------------------------------------------------------------------------------
def shared_accesses(s: Stmt) -> tuple[set[Buffer], set[Buffer]]:
    """(read, written) shared buffers of `s`. A store that reads its own element (an accumulation,
    `P[t] = P[t] + x`) counts as a write only: a thread re-reading what it wrote needs no barrier."""
    reads: set[Buffer] = set()
    writes: set[Buffer] = set()

    def visit(n: object, own: Buffer | None) -> None:
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


def check_threads(func: PrimFunc, shape: LaunchShape) -> None:
    """Reject what would race or deadlock on the GPU: a barrier that only some threads of a block
    reach, and a reduction whose axis is bound to threads (all of them updating one element)."""
    block = dict(zip((f"threadIdx.{a}" for a in "xyz"), shape.block))

    def visit(s: Stmt, threads: list[For], divergent: str | None) -> None:
        if (is_barrier(s) or isinstance(s, ThreadAllReduce)) and divergent is not None:
            raise ScheduleError(f"{func.name}: a shared-memory barrier sits under {divergent}, which not every "
                                "thread of the block reaches; bind the loops around a shared stage to full extents")
        if isinstance(s, Store) and s.buffer.scope != "local":
            _check_race(func, s, threads)
        if isinstance(s, For) and s.kind is ForKind.THREAD_BOUND and s.thread in block:
            if s.extent < block[s.thread] and divergent is None:
                divergent = f"loop {s.var.name} ({s.thread} < {s.extent} of {block[s.thread]})"
            threads = threads + [s]
        if isinstance(s, IfThenElse) and divergent is None and any(uses_var(s.cond, t.var) for t in threads):
            divergent = f"the condition {s.cond}"
        for c in _stmt_children(s):
            visit(c, threads, divergent)

    visit(func.body, [], None)


def _check_race(func: PrimFunc, s: Store, threads: list[For]) -> None:
    updates: list[Expr] = []
    walk(s.value, lambda n: updates.append(n) if isinstance(n, Load) and n.buffer is s.buffer else None)
    if not updates:
        return
    indexed = {t.thread for t in threads if uses_var(s.index, t.var)}
    for t in threads:
        if t.extent > 1 and t.thread not in indexed:
            raise ScheduleError(
                f"{func.name}: every thread of {t.thread} (loop {t.var.name}) updates the same element of "
                f"{s.buffer.name}: a reduction axis bound to threads is not supported; reduce per thread into a "
                "shared stage indexed by the thread axis, then combine that stage")


def serialize_threads(func: PrimFunc) -> PrimFunc:
    """The kernel as a CPU program: bound loops run serially and shared buffers become local.
    Bound loops are ordinary loops in the IR's semantics, so this computes what the GPU should;
    it is how CUDA schedules are checked against numpy where there is no GPU."""
    moved: dict[Buffer, Buffer] = {}

    def local(b: Buffer) -> Buffer:
        if b.scope != "shared":
            return b
        return moved.setdefault(b, Buffer(b.name, b.shape, b.dtype, "local"))

    def post(n: object) -> object | None:
        if isinstance(n, ThreadAllReduce):
            return Seq(())
        if isinstance(n, For) and n.kind is ForKind.THREAD_BOUND:
            return For(n.var, n.extent, ForKind.SERIAL, n.body)
        if isinstance(n, Allocate) and n.buffer.scope == "shared":
            return Allocate(local(n.buffer), n.body)
        if isinstance(n, Load) and n.buffer.scope == "shared":
            return Load(local(n.buffer), n.index, n.predicate)
        if isinstance(n, Store) and n.buffer.scope == "shared":
            return Store(local(n.buffer), n.index, n.value, n.predicate)
        return None

    return PrimFunc(func.name, func.params, transform(func.body, post), func.attrs)
