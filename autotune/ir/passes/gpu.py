"""The GPU steps after lowering, in order (the CUDA codegen's table of contents), and the serial
reading of a GPU kernel.

A lowered CUDA kernel is one root nest whose outer loops are bound to blockIdx; inside, loops
bound to threadIdx run across the block's threads and every other loop runs in each thread.
Read serially (every bound loop an ordinary loop), the IR computes the same values: that is
how CUDA schedules are checked against numpy on a machine without a GPU (`serialize_threads`).
"""
from __future__ import annotations

from ..functor import transform
from ..nodes import Allocate, Buffer, For, ForKind, Load, PrimFunc, Seq, Store, ThreadAllReduce
from .barriers import insert_barriers
from .double_buffer import inject_double_buffers
from .gpu_launch import LaunchShape, check_threads, launch_shape
from .virtual_threads import inject_virtual_threads


def prepare_kernel(func: PrimFunc) -> tuple[PrimFunc, LaunchShape]:
    """The kernel ready for a GPU codegen, and its launch; ScheduleError for what no GPU can run."""
    body = inject_virtual_threads(func.body)                    # vthread loops down to their statements
    body = inject_double_buffers(body)                          # two copies of double-buffered tiles
    body = insert_barriers(body)                                # __syncthreads where shared memory needs it
    func = PrimFunc(func.name, func.params, body, func.attrs)
    shape = launch_shape(func)                                  # grid, block, shared memory: checked
    check_threads(func, shape)                                  # no divergent barrier, no racing update
    return func, shape


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
