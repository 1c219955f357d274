"""Batched matmul on the CPU: C[b] = A[b] @ B[b] (numpy's matmul on 3-d arrays)."""
from __future__ import annotations

import numpy as np

from ... import te
from ..generic import vectorize_by
from ..task import template
from .rules import ascending_first, lanes, register_tile

COLUMNS = (8, 16, 32, 48, 64)
ROWS = (1, 2, 4, 6, 8)
UNROLL_K = (1, 2, 4, 8)


@template("batch_matmul", reference=lambda a, b, **_: np.matmul(a, b),
          description="C[b] = A[b] @ B[b], A: batch x M x K, B: batch x K x N")
def batch_matmul_template(cfg, batch: int, M: int, N: int, K: int, dtype: str = "float32"):
    """Per batch a register-blocked tile with local accumulation; batches and row blocks in parallel.

    Default: matmul's register tile rule (`register_tile`): tile_x = 2 x lanes, tile_y = the most
    rows whose accumulators fit in 3/4 of the vector registers, k unrolled to ~64 multiply-adds a
    step; the row loop unrolled (the tile's accumulators are registers). B is not packed: a row's
    last tile loads and stores masked vectors, and keeps its accumulators in registers (the
    simplifier drops a vector past the edge, `register_tiles` the local masks), so two vectors
    hold on short rows too (Zen 5, 2 threads, x onnxruntime, two vectors / one, attention scores
    with K 64: 33, 49, 77, 145, 230 and 257 tokens 1.23 / 1.16, 1.13 / 0.98, 1.02 / 0.97,
    1.12 / 0.87, 1.00 / 0.79, 1.02 / 0.77; 200 x 60 x 200 1.05 / 0.81). Other values ascending.
    """
    bn, rows, unroll = register_tile(cfg, dtype, M, COLUMNS, ROWS, UNROLL_K)
    cfg.define_split("tile_x", N, 2, policy="candidate", candidate=[[-1, v] for v in ascending_first(bn, COLUMNS)])
    cfg.define_split("tile_y", M, 2, policy="candidate", candidate=[[-1, r] for r in ascending_first(rows, ROWS)])
    cfg.define_split("tile_k", K, 2, policy="candidate", candidate=[[-1, f] for f in ascending_first(unroll, UNROLL_K)])
    cfg.define_knob("unroll_rows", [1, 0])
    A = te.placeholder((batch, M, K), dtype, name="A")
    B = te.placeholder((batch, K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((batch, M, N), lambda b, i, j: te.sum(A[b, i, k] * B[b, k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    b, i, j = C.op.axis
    io, ii = cfg["tile_y"].apply(s, C, i)
    jo, ji = cfg["tile_x"].apply(s, C, j)
    s[C].reorder(b, io, jo, ii, ji)
    s[CC].compute_at(s[C], jo)
    _, ci, cj = s[CC].op.axis
    ko, ki = cfg["tile_k"].apply(s, CC, s[CC].op.reduce_axis[0])
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(ki)
    if cfg["unroll_rows"].val:
        s[CC].unroll(ci)
    vectorize_by(s[CC], cj, cfg["tile_x"].size[-1], lanes(cfg, dtype))
    vectorize_by(s[C], ji, cfg["tile_x"].size[-1], lanes(cfg, dtype))
    s[C].parallel(s[C].fuse(b, io))
    return s, [A, B, C]
