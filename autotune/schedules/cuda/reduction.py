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
from .generic import THREADS, block_width, reduce_across_threads, statistic_per_thread

CUDA_REDUCTIONS = ("sum", "mean", "max", "min", "var")


def schedule_rows(cfg: Any, y: te.Tensor, row: int) -> te.Schedule:
    """One block per output element: every reduction stage at the block, reduced across threads."""
    s = te.create_schedule(y.op)
    # knob `threads`, capped to the row (every thread gets a share of it)
    cfg.define_knob("threads", list(THREADS) + [64, 32])
    threads = block_width(cfg["threads"].val, row)
    out = s[y]
    if out.op.reduce_axis:
        reduce_across_threads(out, threads)
    rows = out.fuse(*out.op.axis) if len(out.op.axis) > 1 else out.op.axis[0]
    out.bind(rows, te.thread_axis("blockIdx.x"))
    for st in s.stages:
        if st is not out and isinstance(st.op, ComputeOp):
            statistic_per_thread(st, out, rows, threads)
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
