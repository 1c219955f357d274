"""Batched matmul on the CPU: C[b] = A[b] @ B[b] (numpy's matmul on 3-d arrays)."""
from __future__ import annotations

import numpy as np

from ... import te
from ..task import template


@template("batch_matmul", reference=lambda a, b, **_: np.matmul(a, b),
          description="C[b] = A[b] @ B[b], A: batch x M x K, B: batch x K x N")
def batch_matmul_template(cfg, batch: int, M: int, N: int, K: int, dtype: str = "float32"):
    """Per batch a register-blocked tile with local accumulation; batches and row blocks in parallel."""
    cfg.define_split("tile_x", N, 2, policy="candidate", candidate=[[-1, v] for v in (32, 16, 64, 8, 48)])
    cfg.define_split("tile_y", M, 2, policy="candidate", candidate=[[-1, r] for r in (4, 8, 2, 6, 1)])
    cfg.define_split("tile_k", K, 2, policy="candidate", candidate=[[-1, f] for f in (4, 1, 2, 8)])
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
    s[CC].vectorize(cj)
    s[C].vectorize(ji)
    s[C].parallel(s[C].fuse(b, io))
    return s, [A, B, C]
