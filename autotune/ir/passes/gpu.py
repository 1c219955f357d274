"""The GPU steps after lowering, in order (the CUDA codegen's table of contents), and the serial
reading of a GPU kernel.

A lowered CUDA kernel is one root nest whose outer loops are bound to blockIdx; inside, loops
bound to threadIdx run across the block's threads and every other loop runs in each thread.
Read serially (every bound loop an ordinary loop), the IR computes the same values: that is
how CUDA schedules are checked against numpy on a machine without a GPU (`serialize_threads`).
"""
from __future__ import annotations

from ...target import CUDA_LIMITS, GpuLimits
from ...te.expr import Node
from ..functor import replace_buffers, transform, walk
from ..nodes import Allocate, Buffer, For, ForKind, PrimFunc, Seq, ThreadAllReduce
from .barriers import insert_barriers
from .double_buffer import inject_double_buffers
from .gpu_launch import LaunchShape, check_threads, launch_shape
from .virtual_threads import inject_virtual_threads


def prepare_kernel(func: PrimFunc, limits: GpuLimits = CUDA_LIMITS) -> tuple[PrimFunc, LaunchShape]:
    """The kernel ready for a GPU codegen, and its launch; ScheduleError for what `limits` forbid."""
    body = inject_virtual_threads(func.body)                    # vthread loops down to their statements
    body = inject_double_buffers(body)                          # two copies of double-buffered tiles
    body = insert_barriers(body)                                # __syncthreads where shared memory needs it
    func = PrimFunc(func.name, func.params, body, func.attrs)
    shape = launch_shape(func, limits)                          # grid, block, shared memory: checked
    check_threads(func, shape)                                  # no divergent barrier, no racing update
    return func, shape


def serialize_threads(func: PrimFunc) -> PrimFunc:
    """The kernel as a CPU program: bound loops run serially and shared buffers become local.
    Bound loops are ordinary loops in the IR's semantics, so this computes what the GPU should;
    it is how CUDA schedules are checked against numpy where there is no GPU."""
    shared: list[Buffer] = []
    walk(func.body, lambda n: shared.append(n.buffer) if isinstance(n, Allocate) and n.buffer.scope == "shared"
         else None)
    local = {b: Buffer(b.name, b.shape, b.dtype, "local") for b in shared}

    def post(n: Node) -> Node | None:
        if isinstance(n, ThreadAllReduce):
            return Seq(())
        if isinstance(n, For) and n.kind is ForKind.THREAD_BOUND:
            return For(n.var, n.extent, ForKind.SERIAL, n.body)
        return None

    return PrimFunc(func.name, func.params, replace_buffers(transform(func.body, post), local), func.attrs)
