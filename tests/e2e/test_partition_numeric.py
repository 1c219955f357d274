"""Loop partition end to end: compiled code on prime shapes (every split has a tail) vs numpy.

Templates run their default config and a few random ones; hand-written schedules nest tails in
every way the pass treats differently: a parallel fused tile loop (versioned), serial tile loops
and a twice-split reduction (partitioned), a local accumulator computed at the tile, padding
selects with a head and a tail, and an elementwise loop split three times.
"""
from __future__ import annotations

import math
import random
import warnings

import numpy as np
import pytest

import autotune
import autotune.te as te
from autotune.measure.check_data import tolerance
from autotune.measure.worker.run import compare

RNG = np.random.default_rng(11)


def run_task(op, index, **params):
    task = autotune.create_task(op, **params)
    inputs = task.make_inputs(np.random.default_rng(0))
    s, args = task.instantiate(index)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                 # a loop that fails to vectorize fails
        f = autotune.build(s, args)
    outs = [np.full(shape, np.nan, dtype) for shape, dtype in task.arg_specs[task.num_inputs:]]
    f(*inputs, *outs)
    reduction = max(1, math.prod(task.arg_specs[0][0]) // max(1, math.prod(task.arg_specs[-1][0])))
    for got, want in zip(outs, task.reference(inputs)):
        rtol, atol = tolerance(str(got.dtype), reduction, {})
        wrong = compare("out", got, np.asarray(want), rtol, atol)
        assert wrong is None, f"{op} config {task.config(index)}: {wrong}"
    return task


def test_matmul_default_config_on_a_large_prime_shape():
    run_task("matmul", 0, M=997, N=1009, K=1013)


SMALL = [("matmul", dict(M=37, N=41, K=43)), ("dense", dict(M=31, N=67, K=29)),
         ("softmax", dict(M=7, N=1009)), ("relu", dict(shape=(1009,))),
         ("add", dict(a_shape=(13, 101), b_shape=(13, 101))), ("conv2d", dict(N=1, C=3, H=17, W=19, F=5, KH=3, KW=3, stride=1, padding=1))]


@pytest.mark.parametrize("op,params", SMALL, ids=[op for op, _ in SMALL])
def test_templates_on_prime_shapes(op, params):
    task = run_task(op, 0, **params)
    space = len(task.config_space)
    for index in random.Random(3).sample(range(1, space), min(3, space - 1)):
        if task.is_valid(index):
            run_task(op, index, **params)


def build_and_run(s, args, inputs):
    f = autotune.build(s, args)
    outs = [np.zeros(t.shape, t.dtype) for t in args[len(inputs):]]
    f(*inputs, *outs)
    return outs


def matmul(M, N, K):
    A, B = te.placeholder((M, K), name="A"), te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    return A, B, te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")


@pytest.mark.parametrize("parallel", ["fused", "outer", "none"])
@pytest.mark.parametrize("cache", [True, False])
@pytest.mark.parametrize("shape", [(37, 41, 43), (97, 101, 103)])
def test_tiled_matmul_with_nested_tails(shape, cache, parallel):
    M, N, K = shape
    A, B, C = matmul(M, N, K)
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local") if cache else C
    io, jo, ii, ji = s[C].tile(*C.op.axis, 12, 16)
    iio, iii = s[C].split(ii, 5)                       # a tail inside the tile's tail
    outer = s[C].fuse(io, jo) if parallel == "fused" else io
    if parallel != "none":
        s[C].parallel(outer)
    if cache:
        s[CL].compute_at(s[C], jo if parallel != "fused" else outer)
        ci, cj = s[CL].op.axis
        s[C].vectorize(ji)
        s[C].unroll(iii)
    else:
        ci, cj = iii, ji
    ko, ki = s[CL].split(s[CL].op.reduce_axis[0], 6)
    kio, kii = s[CL].split(ki, 4)                      # the reduction's tail split again
    s[CL].reorder(ko, kio, ci, kii, cj) if cache else s[C].reorder(ko, kio, iio, ci, kii, cj)
    s[CL].unroll(kii)
    s[CL].vectorize(cj)
    a, b = RNG.standard_normal((M, K)).astype(np.float32), RNG.standard_normal((K, N)).astype(np.float32)
    (c,) = build_and_run(s, [A, B, C], [a, b])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_padded_conv_rows_split_into_head_main_and_tail():
    X, Wt = te.placeholder((1, 3, 23, 29), name="X"), te.placeholder((5, 3, 3, 3), name="W")
    P = te.compute((1, 3, 25, 31), lambda n, c, h, w: te.if_then_else(
        te.all(h >= 1, h < 24, w >= 1, w < 30), X[n, c, h - 1, w - 1], te.const(0.0)), name="P")
    rc, ry, rx = (te.reduce_axis((0, e), name=nm) for e, nm in ((3, "rc"), (3, "ry"), (3, "rx")))
    Y = te.compute((1, 5, 23, 29), lambda n, f, y, x: te.sum(
        P[n, rc, y + ry, x + rx] * Wt[f, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    s = te.create_schedule(Y.op)
    s[P].compute_inline()
    n, f, y, x = Y.op.axis
    xo, xi = s[Y].split(x, 8)
    s[Y].reorder(n, f, y, xo, rc, ry, rx, xi)
    s[Y].vectorize(xi)
    s[Y].parallel(f)
    x_, w = RNG.standard_normal((1, 3, 23, 29)).astype(np.float32), RNG.standard_normal((5, 3, 3, 3)).astype(np.float32)
    (got,) = build_and_run(s, [X, Wt, Y], [x_, w])
    xp = np.pad(x_.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(np.einsum("nchw,fc->nfhw", xp[:, :, dy:dy + 23, dx:dx + 29], w[:, :, dy, dx])
               for dy in range(3) for dx in range(3))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", [1, 7, 1009, 10007])
def test_elementwise_split_three_times(n):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], 64)
    _, xii = s[B].split(xi, 24)
    xiio, xiii = s[B].split(xii, 8)
    s[B].parallel(xo)
    s[B].unroll(xiio)
    s[B].vectorize(xiii)
    a = RNG.standard_normal(n).astype(np.float32)
    (b,) = build_and_run(s, [A, B], [a])
    np.testing.assert_array_equal(b, a * np.float32(2.0) + np.float32(1.0))
