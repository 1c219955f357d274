"""Reductions over the trailing axes on CUDA (sum, mean, max, min, var): one block per output row.

The reduced axes are fused into one row; the block's T threads each accumulate every T-th
element of it (a warp's loads are coalesced) and combine their partials with warp shuffles (a
cross-thread reduction). mean and var's extra stages (the second pass of var, the final scaling)
run per thread on the row's statistics in registers. Same parameters, computes and references as
`autotune.schedules.cpu.reduction`; reductions that keep the innermost axis are refused at task
creation (their rows are not contiguous: transpose first, or use the CPU template).
"""
from __future__ import annotations

from typing import Any

from ... import te
from ...te.tensor import ComputeOp
from ...topi import reduction as topi
from ..cpu.elementwise import as_shape
from ..cpu.reduction import REDUCTIONS, _axes, _keepdims
from ..task import template
from .generic import THREADS

CUDA_REDUCTIONS = ("sum", "mean", "max", "min", "var")


def _block_threads(cfg: Any, row: int) -> int:
    """Knob `threads`, capped at the largest power of two <= the row (a cross-thread reduction
    needs a power-of-two block, and every thread a share of the row)."""
    cfg.define_knob("threads", list(THREADS) + [64, 32])
    threads = cfg["threads"].val
    while threads > row and threads > 1:
        threads //= 2
    return threads


def _reduce_rows(st: Any, threads: int) -> None:
    """The stage's reduce axes fused into one row, split over the threads (inner part bound)."""
    row = st.fuse(*st.op.reduce_axis) if len(st.op.reduce_axis) > 1 else st.op.reduce_axis[0]
    ko, kt = st.split(row, factor=threads)
    st.reorder(*st.op.axis, kt, ko)
    st.bind(kt, te.thread_axis("threadIdx.x"))


def schedule_rows(cfg: Any, y: te.Tensor, row: int) -> te.Schedule:
    """One block per output element: every reduction stage at the block, reduced across threads."""
    s = te.create_schedule(y.op)
    threads = _block_threads(cfg, row)
    out = s[y]
    if out.op.reduce_axis:
        _reduce_rows(out, threads)
    rows = out.fuse(*out.op.axis) if len(out.op.axis) > 1 else out.op.axis[0]
    stages = [st for st in s.stages if isinstance(st.op, ComputeOp)]
    out.bind(rows, te.thread_axis("blockIdx.x"))
    for st in stages:
        if st is out:
            continue
        st.compute_at(out, rows)
        st.set_scope("local")     # each thread keeps the row's statistic in a register
        if st.op.reduce_axis:
            _reduce_rows(st, threads)
    return s


def _register(name: str) -> None:
    compute, ref, what = REDUCTIONS[name]

    def reduction_cuda(cfg: Any, shape: Any, axes: Any, keepdims: int, dtype: str = "float32"):
        x = te.placeholder(as_shape(shape, name, "shape"), dtype, name="x")
        ax = topi.normalize_axes(x.ndim, _axes(axes), name)
        if sorted(ax) != list(range(x.ndim - len(ax), x.ndim)):
            raise ValueError(f"{name} on cuda: reduces the trailing axes only (contiguous rows), got axes "
                             f"{sorted(ax)} of a {x.ndim}-d tensor; transpose first")
        y = compute(x, _axes(axes), _keepdims(keepdims, name))
        row = 1
        for d in ax:
            row *= x.shape[d]
        return schedule_rows(cfg, y, row), [x, y]

    reduction_cuda.__name__ = reduction_cuda.__qualname__ = f"{name}_cuda"
    template(name, reference=ref, target="cuda",
             description=f"y = {what} of x (shape; trailing axes), keepdims 0/1, block per row")(reduction_cuda)


for _name in CUDA_REDUCTIONS:
    _register(_name)
