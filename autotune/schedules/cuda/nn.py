"""Row-wise normalization on CUDA (softmax, log_softmax, layer_norm, rms_norm): one block per row.

The computes are topi's (`autotune.topi.nn`). Each row statistic (max, sum, mean, variance) is a
reduction computed at the row's block with its axis split by the block's T threads and the inner
part bound to threadIdx.x: thread t reads every T-th element (a warp's loads are coalesced),
accumulates in a register, and the threads combine their partials with warp shuffles (a
cross-thread reduction; one exchange through shared memory between warps). Every thread keeps
the statistic and the row scalars (1/sum, mean, rstd) in registers; the output's columns are
split over the threads (vectorized by `vec`). Optionally the row is first copied to shared memory
(`cache_row`), so the passes over it read global memory once. Same args and references as
`autotune.schedules.cpu.nn`.
"""
from __future__ import annotations

from typing import Any, cast

from ... import te
from ...dtype import dtype_info
from ...target import CUDA_LIMITS
from ...te.tensor import ComputeOp
from ...topi import nn as topi_nn
from ...topi.nn import ROW_ELEMWISE, ROW_REDUCE, ROW_SCALAR
from ..cpu.nn import (
    _check_rows,
    _eps,
    layer_norm_reference,
    log_softmax_reference,
    rms_norm_reference,
    softmax_reference,
)
from ..schedule import Schedule
from ..task import template
from .generic import THREADS, VECTOR, bind_cooperative, block_width, statistic_per_thread


def _row_knobs(cfg: Any, N: int, dtype: str) -> int:
    """Knobs `threads` (T), `cache_row` and `vec`; returns the threads of the block: T, or the
    largest power of 2 <= N for a shorter row (a cross-thread reduction needs a power-of-two
    block, and every bound loop must span the whole block)."""
    cfg.define_knob("threads", list(THREADS))
    cfg.define_knob("cache_row", [0, 1])
    cfg.define_knob("vec", list(VECTOR))
    T = cfg["threads"].val
    # the row, plus one partial per warp for each statistic's exchange (two at most)
    row_bytes = (N + 2 * T // CUDA_LIMITS.warp_size) * dtype_info(dtype).bytes
    cfg.raise_if(cfg["cache_row"].val and row_bytes > CUDA_LIMITS.shared_bytes_per_block,
                 f"a row of {N} elements and its partials ({row_bytes} bytes) do not fit in shared memory")
    return block_width(T, N)


def schedule_rows(cfg: Any, out: te.Tensor, x: te.Tensor, T: int) -> Schedule:
    """One block per row of `out` (see the module docstring); `x` is the row input."""
    s = te.create_schedule(out.op)
    st = s[out]
    i, j = st.op.axis
    vec = cfg["vec"].val
    if vec > 1:
        j, v = st.split(j, factor=vec)
    jo, jt = st.split(j, factor=T)
    if vec > 1:
        st.reorder(i, jt, jo, v)
        st.vectorize(v)
    else:
        st.reorder(i, jt, jo)
    st.bind(i, te.thread_axis("blockIdx.x"))
    st.bind(jt, te.thread_axis("threadIdx.x"))
    stages = [p for p in s.stages if p is not st and isinstance(p.op, ComputeOp)]
    if cfg["cache_row"].val:
        readers = [p for p in [*stages, st] if any(t.op is x.op for t in p.op.input_tensors)]
        xs = s.cache_read(x, "shared", readers)
        s[xs].compute_at(st, i)
        bind_cooperative(s, xs, (T,), 1)
    for p in stages:
        tag = cast(ComputeOp, p.op).tag   # stages holds compute stages only
        if tag == ROW_ELEMWISE:
            p.compute_inline()
            continue
        assert tag in (ROW_REDUCE, ROW_SCALAR), f"unexpected row stage {p.name} ({tag})"
        statistic_per_thread(p, st, i, T)
    return s


@template("softmax", reference=softmax_reference, target="cuda",
          description="softmax over the rows of X (M x N), one block per row")
def softmax_cuda(cfg: Any, M: int, N: int, dtype: str = "float32"):
    """Row max, row sum of exp(x - max) (both reduced across the block), then the output."""
    _check_rows("softmax", M, N)
    T = _row_knobs(cfg, N, dtype)
    X = te.placeholder((M, N), dtype, name="X")
    Y = topi_nn.softmax(X, store_exp=False)
    return schedule_rows(cfg, Y, X, T), [X, Y]


@template("log_softmax", reference=log_softmax_reference, target="cuda",
          description="log_softmax over the rows of X (M x N), one block per row")
def log_softmax_cuda(cfg: Any, M: int, N: int, dtype: str = "float32"):
    """x - max - log(sum(exp(x - max))), the two row statistics reduced across the block."""
    _check_rows("log_softmax", M, N)
    T = _row_knobs(cfg, N, dtype)
    X = te.placeholder((M, N), dtype, name="X")
    Y = topi_nn.log_softmax(X)
    return schedule_rows(cfg, Y, X, T), [X, Y]


@template("layer_norm", reference=layer_norm_reference, target="cuda",
          description="layer norm over the rows of X (M x N), gamma/beta (N,); eps a float; block per row")
def layer_norm_cuda(cfg: Any, M: int, N: int, eps: float = 1e-5, dtype: str = "float32"):
    """Row mean, then row variance (two block reductions), then the affine output."""
    _check_rows("layer_norm", M, N)
    e = _eps(eps, "layer_norm")
    T = _row_knobs(cfg, N, dtype)
    X = te.placeholder((M, N), dtype, name="X")
    gamma = te.placeholder((N,), dtype, name="gamma")
    beta = te.placeholder((N,), dtype, name="beta")
    Y = topi_nn.layer_norm(X, gamma, beta, e)
    return schedule_rows(cfg, Y, X, T), [X, gamma, beta, Y]


@template("rms_norm", reference=rms_norm_reference, target="cuda",
          description="RMS norm over the rows of X (M x N), gamma (N,); eps a float; block per row")
def rms_norm_cuda(cfg: Any, M: int, N: int, eps: float = 1e-6, dtype: str = "float32"):
    """Row mean of squares (one block reduction), then x * rsqrt(ms + eps) * gamma."""
    _check_rows("rms_norm", M, N)
    e = _eps(eps, "rms_norm")
    T = _row_knobs(cfg, N, dtype)
    X = te.placeholder((M, N), dtype, name="X")
    gamma = te.placeholder((N,), dtype, name="gamma")
    Y = topi_nn.rms_norm(X, gamma, e)
    return schedule_rows(cfg, Y, X, T), [X, gamma, Y]
