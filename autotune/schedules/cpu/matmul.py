"""Matmul on the CPU: the compute definitions and the classic hand schedule.

The hand schedule is TVM's GEMM recipe: B packed into column panels so the innermost loop reads
it contiguously, C tiled, each tile accumulated in a small local buffer (registers after LLVM's
promotion) by compute_at, k split and unrolled, the panel columns vectorized, tiles in parallel.
"""
from __future__ import annotations

import numpy as np

from ... import te
from ...schedules.schedule import Schedule
from ..task import template


def matmul(M: int, N: int, K: int, dtype: str = "float32", name: str = "C") -> tuple[te.Tensor, te.Tensor, te.Tensor]:
    """C[i, j] = sum_k A[i, k] * B[k, j]."""
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name=name)
    return A, B, C


def default_schedule(M: int, N: int, K: int, dtype: str = "float32") -> tuple[Schedule, list[te.Tensor]]:
    """The naive triple loop (what an untuned kernel runs)."""
    A, B, C = matmul(M, N, K, dtype)
    return te.create_schedule(C.op), [A, B, C]


def hand_schedule(M: int, N: int, K: int, dtype: str = "float32", bn: int = 32, rows: int = 8,
                  kfactor: int = 4) -> tuple[Schedule, list[te.Tensor]]:
    """Packed B, bn x bn tiles, `rows` x bn register block, k split by `kfactor`, vector, parallel."""
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    panels = -(-N // bn)
    packed = te.compute((panels, K, bn), lambda x, y, z: te.if_then_else(
        x * bn + z < N, B[y, te.minimum(x * bn + z, N - 1)], te.const(0, dtype)), name="packedB")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * packed[j // bn, k, j % bn], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    i, j = C.op.axis
    io, jo, ii, ji = s[C].tile(i, j, bn, bn)
    iio, _iii = s[C].split(ii, rows)
    s[CC].compute_at(s[C], iio)
    ci, cj = s[CC].op.axis
    (kc,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kc, kfactor)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(ki)
    s[CC].unroll(ci)
    s[CC].vectorize(cj)
    s[C].vectorize(ji)
    fused = s[C].fuse(io, jo)
    s[C].parallel(fused)
    x, _, z = s[packed].op.axis
    s[packed].vectorize(z)
    s[packed].parallel(x)
    return s, [A, B, C]


def _packed_b(B: te.Tensor, N: int, K: int, bn: int, dtype: str, transposed: bool) -> te.Tensor:
    """B (K x N, or N x K when transposed) as ceil(N/bn) panels of bn columns, zero-padded at the tail."""

    def elem(x, y, z):
        col = te.minimum(x * bn + z, N - 1)
        return te.if_then_else(x * bn + z < N, B[col, y] if transposed else B[y, col], te.const(0, dtype))

    return te.compute((-(-N // bn), K, bn), elem, name="packedB")


def _matmul_body(cfg, M: int, N: int, K: int, dtype: str, transposed: bool = False, epilogue=None,
                 extra_inputs=()):
    """Shared by matmul and dense: the packed/unpacked product with a tiled, tunable schedule.

    `epilogue(C)` returns the output computed from C elementwise (bias, activation): C is then
    computed into a local tile at the output's block and never written to memory.
    """
    cfg.define_knob("pack_b", [1, 0])
    cfg.define_split("tile_x", N, 2, policy="candidate", candidate=[[-1, v] for v in (32, 16, 64, 8, 48, 24, 96, 128)])
    cfg.define_split("tile_y", M, 3, policy="candidate",
                     candidate=[[-1, m, r] for r in (8, 4, 6, 2, 1) for m in (4, 1, 2, 8, 16)])
    cfg.define_split("tile_k", K, 2, policy="candidate", candidate=[[-1, f] for f in (4, 1, 2, 8, 16)])
    cfg.define_knob("unroll_rows", [1, 0])
    cfg.define_knob("parallel", ["fused", "outer", "none"])
    bn = cfg["tile_x"].size[-1]
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((N, K) if transposed else (K, N), dtype, name="W" if transposed else "B")
    k = te.reduce_axis((0, K), name="k")
    if cfg["pack_b"].val:
        packed = _packed_b(B, N, K, bn, dtype, transposed)
        C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * packed[j // bn, k, j % bn], axis=k), name="C")
    else:
        packed = None
        C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * (B[j, k] if transposed else B[k, j]), axis=k),
                       name="C")
    out = C if epilogue is None else epilogue(C)
    s = te.create_schedule(out.op)
    CC = s.cache_write(C, "local") if epilogue is None else C
    i, j = out.op.axis
    io, im, ir = cfg["tile_y"].apply(s, out, i)
    jo, ji = cfg["tile_x"].apply(s, out, j)
    s[out].reorder(io, jo, im, ir, ji)
    s[CC].compute_at(s[out], im)
    ci, cj = s[CC].op.axis
    ko, ki = cfg["tile_k"].apply(s, CC, s[CC].op.reduce_axis[0])
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(ki)
    if cfg["unroll_rows"].val:
        s[CC].unroll(ci)
    s[CC].vectorize(cj)
    s[out].vectorize(ji)
    if cfg["parallel"].val == "fused":
        s[out].parallel(s[out].fuse(io, jo))
    elif cfg["parallel"].val == "outer":
        s[out].parallel(io)
    if packed is not None:
        x, _, z = s[packed].op.axis
        s[packed].vectorize(z)
        s[packed].parallel(x)
    return s, [A, B, *extra_inputs, out]


@template("matmul", reference=lambda a, b, **_: a @ b, description="C = A @ B, A: M x K, B: K x N")
def matmul_template(cfg, M: int, N: int, K: int, dtype: str = "float32"):
    """C = A @ B with packed B, register-blocked local accumulation, k unrolling and threads."""
    return _matmul_body(cfg, M, N, K, dtype)


def _dense_reference(x, w, bias, **_):
    return np.maximum(x @ w.T + bias, 0)


@template("dense", reference=_dense_reference, description="relu(X @ W.T + bias), X: M x K, W: N x K (fused epilogue)")
def dense_template(cfg, M: int, N: int, K: int, dtype: str = "float32"):
    """relu(X @ W.T + bias) in one kernel: the epilogue runs on the register tile."""
    bias = te.placeholder((N,), dtype, name="bias")

    def epilogue(C):
        return te.compute((M, N), lambda i, j: te.maximum(C[i, j] + bias[j], te.const(0, dtype)), name="Y")

    return _matmul_body(cfg, M, N, K, dtype, transposed=True, epilogue=epilogue, extra_inputs=(bias,))
