"""Matmul on the CPU: the compute definitions and the classic hand schedule.

The hand schedule is TVM's GEMM recipe: B packed into column panels so the innermost loop reads
it contiguously, C tiled, each tile accumulated in a small local buffer (registers after LLVM's
promotion) by compute_at, k split and unrolled, the panel columns vectorized, tiles in parallel.
"""
from __future__ import annotations

from ... import te
from ...schedules.schedule import Schedule


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
    iio, iii = s[C].split(ii, rows)
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
