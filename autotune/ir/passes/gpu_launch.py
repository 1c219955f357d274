"""The launch of a lowered CUDA kernel: its grid, block and static shared memory, read from the
bound loops and checked against the target's limits (`autotune.target.GpuLimits`), and the
checks that need the launch (a barrier under a branch some threads skip, threads updating one
element).

A kernel is one root nest whose outer loops are bound to blockIdx; inside, a loop bound to
threadIdx runs across the block's threads (its extent at most the block's), every other loop in
each thread. Each rule raises a ScheduleError naming it, before any code is generated.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...dtype import dtype_info
from ...errors import ScheduleError
from ...target import CUDA_LIMITS, GpuLimits
from ...te.expr import Expr
from ..functor import children, uses_var, walk
from ..nodes import Allocate, Buffer, For, ForKind, IfThenElse, Load, PrimFunc, Seq, Stmt, Store, ThreadAllReduce
from .barriers import is_barrier


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
    if not (isinstance(body, For) and body.kind is ForKind.THREAD_BOUND
            and (body.thread or "").startswith("blockIdx")):
        raise ScheduleError(f"{func.name}: the outermost loop of a CUDA kernel must be bound to blockIdx "
                            "(s[T].bind(axis, te.thread_axis('blockIdx.x')))")
    return body


def _bound_extents(func: PrimFunc) -> dict[str, int]:
    """The largest extent of each bound tag, checking that blocks enclose threads."""
    dims: dict[str, int] = {}

    def visit(s: Stmt, inside_thread: str | None) -> None:
        if isinstance(s, For) and s.kind is ForKind.THREAD_BOUND and s.thread != "vthread":
            tag = s.thread
            assert tag is not None   # a THREAD_BOUND loop names its axis
            if tag.startswith("blockIdx") and inside_thread is not None:
                raise ScheduleError(f"{func.name}: loop {s.var.name} is bound to {s.thread} inside loop bound to "
                                    f"{inside_thread}; bind block indices outside thread indices")
            dims[tag] = max(dims.get(tag, 1), s.extent)
            inside_thread = tag if tag.startswith("threadIdx") else inside_thread
        for c in _stmt_children(s):
            visit(c, inside_thread)

    visit(func.body, None)
    return dims


def _stmt_children(s: Stmt) -> list[Stmt]:
    return [c for c in children(s) if isinstance(c, Stmt)]


def shared_bytes(func: PrimFunc) -> int:
    allocs: list[Buffer] = []
    walk(func.body, lambda n: allocs.append(n.buffer) if isinstance(n, Allocate) and n.buffer.scope == "shared"
         else None)
    return sum(b.size * dtype_info(b.dtype).bytes for b in allocs)


def allreduce_warps(block: tuple[int, ...], warp: int = CUDA_LIMITS.warp_size) -> int:
    """Warps per row of threadIdx.x whose partial results an all-reduce exchanges through shared
    memory (0 when the row fits in one warp and shuffles alone suffice)."""
    return block[0] // warp if block[0] > warp else 0


def _allreduce_scratch_bytes(func: PrimFunc, block: tuple[int, ...], warp: int) -> int:
    reduces: list[ThreadAllReduce] = []
    walk(func.body, lambda n: reduces.append(n) if isinstance(n, ThreadAllReduce) else None)
    if reduces and block[0] & (block[0] - 1):
        raise ScheduleError(f"{func.name}: a reduction across threadIdx.x needs a power-of-two block width, "
                            f"got {block[0]}")
    rows = block[1] * block[2] * allreduce_warps(block, warp)
    return sum(rows * dtype_info(r.buffer.dtype).bytes for r in reduces)


def launch_shape(func: PrimFunc, limits: GpuLimits = CUDA_LIMITS) -> LaunchShape:
    """The launch a kernel needs; ScheduleError for a binding past `limits`, before compiling."""
    _root_nest(func)
    dims = _bound_extents(func)
    for tag, n in dims.items():
        prefix, axis = tag.split(".")
        limit = (limits.max_block_dim if prefix == "threadIdx" else limits.max_grid_dim)["xyz".index(axis)]
        if n > limit:
            raise ScheduleError(f"{func.name}: {tag} has extent {n}, over the limit {limit}")
    block = tuple(dims.get(f"threadIdx.{a}", 1) for a in "xyz")
    grid = tuple(dims.get(f"blockIdx.{a}", 1) for a in "xyz")
    if math.prod(block) > limits.max_threads_per_block:
        raise ScheduleError(f"{func.name}: {math.prod(block)} threads per block (block {block}), over the "
                            f"limit {limits.max_threads_per_block}")
    smem = shared_bytes(func) + _allreduce_scratch_bytes(func, block, limits.warp_size)
    if smem > limits.shared_bytes_per_block:
        raise ScheduleError(f"{func.name}: {smem} bytes of shared memory per block, over the limit "
                            f"{limits.shared_bytes_per_block}")
    return LaunchShape(grid, block, smem)  # type: ignore[arg-type]


def check_threads(func: PrimFunc, shape: LaunchShape) -> None:
    """Reject what would race or deadlock on the GPU: a barrier (or all-reduce) that only some
    threads of a block reach, and threads updating one shared or global element."""
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
                f"{s.buffer.name}, a race; bind the reduction axis to threadIdx.x (a cross-thread reduction) "
                "or index the stage by the thread axis")
