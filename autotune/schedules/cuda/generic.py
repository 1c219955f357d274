"""Schedule pieces every CUDA template shares: the device limits templates check with
`cfg.raise_if`, the cooperative fetch of a shared-memory tile, and the generic injective schedule
(one fused kernel for any elementwise / broadcast chain).

The injective schedule inlines every producer, fuses all output axes into one and splits it into
(blocks, threads, vectors per thread, vector): consecutive threads handle consecutive vectors,
so every warp's loads and stores are coalesced, and a thread walks its elements a whole grid row
apart (the grid-stride loop of hand-written CUDA, at a fixed count).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ... import te
from ..generic import inline_injective
from ..schedule import Schedule, Stage, create_schedule

THREADS = (256, 128, 512, 1024)      # the first of each is the default config's
VECTOR = (4, 1, 2)
PER_THREAD = (1, 2, 4, 8)


def bind_cooperative(s: Schedule, tensor: te.Tensor, threads: Sequence[int], vec: int) -> None:
    """Fetch a shared tile with every thread of the block: the innermost axis split by `vec`
    (vectorized: one float4 per thread when the source row is 16-byte aligned; the caller makes
    `vec` divide the tile's innermost extent), the rest fused and split over (threadIdx.y,
    threadIdx.x). `threads` is (ty, tx), or (tx,) for 1-d blocks."""
    st = s[tensor]
    *outer, inner = st.op.axis
    if vec > 1:
        inner, v = st.split(inner, factor=vec)
        st.vectorize(v)
    f = st.fuse(*outer, inner) if outer else inner
    tags = ("threadIdx.y", "threadIdx.x")[-len(threads):]
    for n, tag in reversed(list(zip(threads, tags))):
        f, t = st.split(f, factor=n)
        st.bind(t, te.thread_axis(tag))


def split_exact(st: Any, axis: Any, size: Sequence[int]) -> list[Any]:
    """Split `axis` by a split knob's factors (-1, f1, ..., fn) outermost first: only the
    outermost loop has a tail, so the bound guard stays at the innermost loop. (The knob's own
    `apply` splits innermost first, so an inner thread loop could carry the tail and its guard
    would enclose the shared-memory barriers of the stages computed under it.)"""
    out = []
    for k in range(1, len(size)):
        inner = 1
        for f in size[k:]:
            inner *= f
        outer, axis = st.split(axis, factor=inner)
        out.append(outer)
    return [*out, axis]


def tile_extent(size: Sequence[int]) -> int:
    """One block's extent along an axis split by a knob (-1, f1, ..., fn): f1 * ... * fn."""
    return math.prod(size[1:])


def round_up(n: int, tile: int) -> int:
    """n rounded up to a multiple of tile: the extent a product of whole tiles covers."""
    return -(-n // tile) * tile


def crop(T: te.Tensor, shape: Sequence[int], name: str) -> te.Tensor:
    """The leading corner of `shape` of T: a product computed over whole tiles, stored without
    the rows and columns the tiles added."""
    return te.compute(tuple(shape), lambda *i: T[i], name=name)


def block_width(threads: int, n: int) -> int:
    """`threads` halved until at most `n`: a power of two (a cross-thread reduction needs one)
    that gives every thread a share of a row of n elements."""
    while threads > n and threads > 1:
        threads //= 2
    return threads


def reduce_across_threads(st: Stage, threads: int) -> None:
    """A reduction's axes (fused) split by `threads`, the inner part bound to threadIdx.x: each
    thread accumulates every threads-th element (a warp's loads coalesced), then the threads
    combine their partials with warp shuffles (a cross-thread reduction)."""
    k = st.fuse(*st.op.reduce_axis) if len(st.op.reduce_axis) > 1 else st.op.reduce_axis[0]
    ko, kt = st.split(k, factor=threads)
    st.reorder(*st.op.axis, kt, ko)
    st.bind(kt, te.thread_axis("threadIdx.x"))


def statistic_per_thread(st: Stage, consumer: Stage, axis: Any, threads: int) -> None:
    """A row statistic (or a scalar made of one) computed at the consumer's block loop into each
    thread's registers (every thread needs it); a reduction is reduced across the threads."""
    st.compute_at(consumer, axis)
    st.set_scope("local")
    if st.op.reduce_axis:
        reduce_across_threads(st, threads)


def schedule_injective(cfg: Any, s: Schedule, out: te.Tensor, prefix: str = "") -> None:
    """One kernel for an injective output. Knobs: `threads` per block, `vec` (elements per
    thread access, innermost, vectorized) and `per_thread` (vectors per thread, a grid stride apart)."""
    inline_injective(s)
    st = s[out]
    cfg.define_knob(f"{prefix}threads", list(THREADS))
    cfg.define_knob(f"{prefix}vec", list(VECTOR))
    cfg.define_knob(f"{prefix}per_thread", list(PER_THREAD))
    threads, vec, per = (cfg[f"{prefix}{k}"].val for k in ("threads", "vec", "per_thread"))
    shape = out.shape
    total = 1
    for n in shape:
        total *= n
    cfg.raise_if(per > 1 and total < threads * vec * per * 2,
                 f"{per} vectors per thread leaves fewer than 2 blocks for {total} elements")
    f = st.fuse(*st.op.axis) if len(shape) > 1 else st.op.axis[0]
    if vec > 1:
        f, v = st.split(f, factor=vec)
        st.vectorize(v)
    f, t = st.split(f, factor=threads)
    if per > 1:
        # the elements of a thread are a grid apart: nparts keeps consecutive blocks adjacent
        p, f = st.split(f, nparts=per)
        st.reorder(f, t, p)
        st.unroll(p)
    st.bind(f, te.thread_axis("blockIdx.x"))
    st.bind(t, te.thread_axis("threadIdx.x"))


def injective_schedule(cfg: Any, out: te.Tensor) -> Schedule:
    """A new schedule of `out` alone, scheduled by `schedule_injective`."""
    s = create_schedule(out)
    schedule_injective(cfg, s, out)
    return s


def schedule_auto(cfg: Any, s: Schedule, outs: Sequence[te.Tensor]) -> str:
    """The CUDA generic schedule of a user's te computation (`create_task_from_te(target="cuda")`):
    an injective computation with one output becomes one kernel; anything else is refused here,
    at task creation, rather than failing at build (a kernel is one root loop nest, so several
    outputs would need several kernels; reductions need a template)."""
    from ..generic import classify

    kind = classify(s)
    if kind != "injective":
        raise ValueError("generic CUDA schedule: only injective computations (elementwise, broadcast, "
                         f"movement) are supported, this one has {kind} reductions; write a template for it")
    if len(outs) != 1:
        raise ValueError(f"generic CUDA schedule: one output per kernel, got {len(outs)}")
    schedule_injective(cfg, s, outs[0])
    return kind
