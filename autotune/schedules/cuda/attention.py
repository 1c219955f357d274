"""Fused attention on CUDA: one block per (batch * head, query tile), as a search space.

The compute is topi's (`autotune.topi.nn.attention`, one lane per reduction), with the cpu
template's parameters, argument order and reference (`autotune.schedules.cpu.nn`). Per block:
the query tile is staged in shared memory; the scores of its `tile_q` rows against every key go
to a shared score buffer (the block's threads take consecutive (row, key) elements, each a dot
product over the head dimension); the row max and the row sum of exp(score - max) are reductions
across the block's threads (every thread walks every T-th key, then warp shuffles combine; each
thread keeps all the row statistics in registers); the probabilities go to a second shared
buffer (or, with `inline_exp`, are recomputed where they are read, so only the scores are kept
and twice the keys fit); then each thread computes output elements (row, d) as P @ V over the
keys (consecutive threads read consecutive d of a V row: coalesced) times 1 / sum.

Not an online softmax, for the reason given in the cpu template: the whole key range of a query
tile is kept, so the shared memory bounds tile_q x seq_k (configs that do not fit are illegal).
"""
from __future__ import annotations

from typing import Any

from ... import te
from ...dtype import dtype_info
from ...target import CUDA_LIMITS
from ...topi import nn as topi_nn
from ...topi.nn import KEY_PACK, ROW_ELEMWISE, ROW_REDUCE, ROW_SCALAR
from ..cpu.nn import DEFAULT_SCALE, attention_reference, attention_scale
from ..schedule import Schedule
from ..task import template
from .generic import bind_cooperative, block_width, statistic_per_thread

# first = the default config's: 4 query rows per block (a 1024-key row pair of score and
# probability buffers is 32 KiB), 128 threads (4 warps)
_TILE_Q = (4, 8, 2, 1, 16)
_THREADS = (128, 256, 64, 512, 32)


def _check_args(batch: int, heads: int, seq_q: int, seq_k: int, head_dim: int, causal: int) -> None:
    if min(batch, heads, seq_q, seq_k, head_dim) < 1 or causal not in (0, 1):
        raise ValueError(f"attention: sizes must be >= 1 and causal 0 or 1, got batch={batch}, heads={heads}, "
                         f"seq_q={seq_q}, seq_k={seq_k}, head_dim={head_dim}, causal={causal}")


def _define_knobs(cfg: Any, seq_q: int, seq_k: int, head_dim: int, dtype: str) -> tuple[int, int]:
    """Knobs tile_q, threads, inline_exp; returns (query rows per block, threads per block). The
    threads shrink to the largest power of two <= seq_k: the row reductions split the keys over
    the whole block, a power-of-two block (a shuffle all-reduce needs one)."""
    cfg.define_split("tile_q", seq_q, 2, policy="candidate", candidate=[[-1, q] for q in _TILE_Q])
    cfg.define_knob("threads", list(_THREADS))
    cfg.define_knob("inline_exp", [0, 1])
    tq, T = cfg["tile_q"].size[-1], block_width(cfg["threads"].val, seq_k)
    buffers = 1 if cfg["inline_exp"].val else 2
    # the score (and probability) tiles, the query tile, one partial per warp for the two exchanges
    warps, limit = T // CUDA_LIMITS.warp_size, CUDA_LIMITS.shared_bytes_per_block
    shared = (buffers * tq * seq_k + tq * head_dim + 2 * warps) * dtype_info(dtype).bytes
    cfg.raise_if(shared > limit,
                 f"{buffers} score tile(s) of {tq} x {seq_k} and the query tile ({shared} bytes) do not fit "
                 f"in shared memory ({limit} bytes)")
    return tq, T


def _schedule_output(s: Schedule, out: te.Tensor, tq: int, T: int) -> tuple[Any, Any]:
    """Blocks over (batch * heads * query tiles); the tile's (row, d) elements over the threads.
    Returns (block loop, per-thread element loop)."""
    st = s[out]
    b, h, i, d = st.op.axis
    io, ii = st.split(i, factor=tq)
    block = st.fuse(b, h, io)
    e = st.fuse(ii, d)
    eo, et = st.split(e, factor=T)
    st.reorder(block, et, eo)
    st.bind(block, te.thread_axis("blockIdx.x"))
    st.bind(et, te.thread_axis("threadIdx.x"))
    return block, eo


def _schedule_stages(s: Schedule, out: te.Tensor, q: te.Tensor, tq: int, T: int, inline_exp: bool) -> None:
    """Every producer of `out` computed per block (shared tiles, register statistics) or inlined."""
    block, element = _schedule_output(s, out, tq, T)
    stages = {st.op.name: st for st in s.stages}
    for st in list(s.stages):
        tag = st.op.tag if isinstance(st.op, te.ComputeOp) else None
        if st is s[out] or tag is None:
            continue
        if tag == KEY_PACK or (tag == ROW_ELEMWISE and inline_exp):
            st.compute_inline()     # K read in place (each thread's dot product walks one key row)
        elif tag == ROW_ELEMWISE:
            st.set_scope("shared")
            st.compute_at(s[out], block)
            bind_cooperative(s, st.op.output(0), (T,), 1)
        elif tag in (ROW_REDUCE, ROW_SCALAR):
            statistic_per_thread(st, s[out], block, T)
    S = stages["S"]
    S.set_scope("shared")
    S.compute_at(s[out], block)
    bind_cooperative(s, S.op.output(0), (T,), 1)
    QS = s.cache_read(q, "shared", [S])
    s[QS].compute_at(s[out], block)
    bind_cooperative(s, QS, (T,), 1)
    PV = stages["PV"]
    PV.set_scope("local")
    PV.compute_at(s[out], element)


@template("attention", reference=attention_reference, target="cuda",
          description="fused attention, q/k/v (batch, heads, seq, head_dim); causal 0/1; scale a float, "
                      "0.0 = 1/sqrt(head_dim); one block per (batch * head, query tile)")
def attention_cuda(cfg: Any, batch: int, heads: int, seq_q: int, seq_k: int, head_dim: int, causal: int,
                   scale: float = DEFAULT_SCALE, dtype: str = "float32"):
    """Scores of a query tile in shared memory, row max / exp-sum reduced across the block's
    threads, then P @ V: one kernel, no score matrix in global memory."""
    _check_args(batch, heads, seq_q, seq_k, head_dim, causal)
    sc = attention_scale(scale, head_dim)
    tq, T = _define_knobs(cfg, seq_q, seq_k, head_dim, dtype)
    shape_q, shape_kv = (batch, heads, seq_q, head_dim), (batch, heads, seq_k, head_dim)
    q = te.placeholder(shape_q, dtype, name="q")
    k = te.placeholder(shape_kv, dtype, name="k")
    v = te.placeholder(shape_kv, dtype, name="v")
    out = topi_nn.attention(q, k, v, scale=sc, causal=bool(causal), lanes=1)
    s = te.create_schedule(out.op)
    _schedule_stages(s, out, q, tq, T, bool(cfg["inline_exp"].val))
    return s, [q, k, v, out]
