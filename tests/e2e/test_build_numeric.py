"""Compiled code vs numpy: every primitive and their combinations, on shapes with tails everywhere."""
import numpy as np
import pytest

import autotune
import autotune.te as te

RNG = np.random.default_rng(7)


def rand(shape, dtype="float32"):
    if np.dtype(dtype).kind == "i":
        return RNG.integers(-50, 50, size=shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def run(s, args, inputs):
    f = autotune.build(s, args)
    outs = [np.zeros(t.shape, t.dtype) for t in args[len(inputs):]]
    f(*inputs, *outs)
    return outs


def matmul(M, N, K, dtype="float32"):
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def conv2d(N, C, H, W, F, KH, KW, pad, stride=1):
    X = te.placeholder((N, C, H, W), name="X")
    Wt = te.placeholder((F, C, KH, KW), name="W")
    Hp, Wp = H + 2 * pad, W + 2 * pad
    P = te.compute((N, C, Hp, Wp), lambda n, c, h, w: te.if_then_else(
        te.all(h >= pad, h < H + pad, w >= pad, w < W + pad), X[n, c, h - pad, w - pad], te.const(0.0)), name="pad")
    OH, OW = (Hp - KH) // stride + 1, (Wp - KW) // stride + 1
    rc = te.reduce_axis((0, C), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    Y = te.compute((N, F, OH, OW), lambda n, f, y, x: te.sum(
        P[n, rc, y * stride + ry, x * stride + rx] * Wt[f, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    return X, Wt, P, Y


def conv2d_ref(x, w, pad, stride=1):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, hp, wp = xp.shape
    f, _, kh, kw = w.shape
    oh, ow = (hp - kh) // stride + 1, (wp - kw) // stride + 1
    out = np.zeros((n, f, oh, ow), np.float64)
    for y in range(kh):
        for x in range(kw):
            patch = xp[:, :, y:y + stride * oh:stride, x:x + stride * ow:stride]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, y, x])
    return out


def softmax(M, N):
    X = te.placeholder((M, N), name="X")
    k1 = te.reduce_axis((0, N), name="k1")
    mx = te.compute((M,), lambda i: te.max(X[i, k1], axis=k1), name="mx")
    ex = te.compute((M, N), lambda i, j: te.exp(X[i, j] - mx[i]), name="ex")
    k2 = te.reduce_axis((0, N), name="k2")
    sm = te.compute((M,), lambda i: te.sum(ex[i, k2], axis=k2), name="sm")
    Y = te.compute((M, N), lambda i, j: ex[i, j] / sm[i], name="Y")
    return X, mx, ex, sm, Y


def softmax_ref(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_default_matmul_all_dtypes(dtype):
    A, B, C = matmul(13, 7, 11, dtype)
    a, b = rand((13, 11), dtype), rand((11, 7), dtype)
    (c,) = run(te.create_schedule(C.op), [A, B, C], [a, b])
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


@pytest.mark.parametrize("prim", ["split", "nparts", "tile", "fuse", "reorder", "vectorize", "unroll", "parallel"])
def test_each_primitive_on_a_tail_shape(prim):
    A, B, C = matmul(37, 29, 17)
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    (k,) = C.op.reduce_axis
    if prim == "split":
        s[C].split(i, 8)
        s[C].split(k, 5)
    elif prim == "nparts":
        s[C].split(j, nparts=4)
    elif prim == "tile":
        s[C].tile(i, j, 8, 6)
    elif prim == "fuse":
        s[C].fuse(i, j)
    elif prim == "reorder":
        s[C].reorder(k, j, i)
    elif prim == "vectorize":
        _, ji = s[C].split(j, 8)
        s[C].vectorize(ji)
    elif prim == "unroll":
        _, ki = s[C].split(k, 4)
        s[C].unroll(ki)
    elif prim == "parallel":
        s[C].parallel(i)
    a, b = rand((37, 17)), rand((17, 29))
    (c,) = run(s, [A, B, C], [a, b])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_classic_matmul_schedule_on_odd_shape():
    from autotune.schedules.cpu.matmul import hand_schedule

    s, args = hand_schedule(67, 45, 31)
    a, b = rand((67, 31)), rand((31, 45))
    (c,) = run(s, args, [a, b])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_cache_write_compute_at_reorder_vectorize_parallel():
    A, B, C = matmul(37, 29, 13)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*C.op.axis, 8, 16)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], 4)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].vectorize(cj)
    s[CC].unroll(ki)
    s[C].vectorize(ji)
    s[C].parallel(io)
    a, b = rand((37, 13)), rand((13, 29))
    (c,) = run(s, [A, B, C], [a, b])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_cache_read_into_local_buffer():
    A, B, C = matmul(19, 23, 9)
    s = te.create_schedule(C.op)
    AL = s.cache_read(A, "local", [C])
    io, ii = s[C].split(C.op.axis[0], 4)
    s[AL].compute_at(s[C], io)
    a, b = rand((19, 9)), rand((9, 23))
    (c,) = run(s, [A, B, C], [a, b])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("inline_pad", [True, False])
def test_conv2d_with_padded_stage(inline_pad):
    X, Wt, P, Y = conv2d(1, 3, 11, 9, 5, 3, 3, pad=1)
    s = te.create_schedule(Y.op)
    if inline_pad:
        s[P].compute_inline()
    else:
        s[P].compute_at(s[Y], Y.op.axis[2])
    n, f, y, x = Y.op.axis
    xo, xi = s[Y].split(x, 4)
    s[Y].vectorize(xi)
    x_, w_ = rand((1, 3, 11, 9)), rand((5, 3, 3, 3))
    (y_,) = run(s, [X, Wt, Y], [x_, w_])
    np.testing.assert_allclose(y_, conv2d_ref(x_, w_, 1), rtol=1e-4, atol=1e-4)


def test_strided_conv2d():
    X, Wt, P, Y = conv2d(2, 4, 13, 12, 3, 3, 3, pad=2, stride=2)
    s = te.create_schedule(Y.op)
    s[P].compute_inline()
    x_, w_ = rand((2, 4, 13, 12)), rand((3, 4, 3, 3))
    (y_,) = run(s, [X, Wt, Y], [x_, w_])
    np.testing.assert_allclose(y_, conv2d_ref(x_, w_, 2, 2), rtol=1e-4, atol=1e-4)


def test_softmax_stages_computed_at_the_row():
    X, mx, ex, sm, Y = softmax(7, 33)
    s = te.create_schedule(Y.op)
    i = Y.op.axis[0]
    for t in (mx, ex, sm):
        s[t].compute_at(s[Y], i)
    _, ji = s[Y].split(Y.op.axis[1], 8)
    s[Y].vectorize(ji)
    s[Y].parallel(i)
    x = rand((7, 33))
    (y,) = run(s, [X, Y], [x])
    np.testing.assert_allclose(y, softmax_ref(x), rtol=1e-5, atol=1e-6)


def test_inlined_elementwise_chain():
    A = te.placeholder((101,), name="A")
    B = te.compute((101,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((101,), lambda i: te.maximum(B[i] + 1.0, te.const(0.0)), name="C")
    D = te.compute((101,), lambda i: te.tanh(C[i]) - te.sigmoid(B[i]), name="D")
    s = te.create_schedule(D.op)
    s[B].compute_inline()
    s[C].compute_inline()
    xo, xi = s[D].split(D.op.axis[0], 16)
    s[D].vectorize(xi)
    a = rand((101,))
    (d,) = run(s, [A, D], [a])
    b = a * 2
    np.testing.assert_allclose(d, np.tanh(np.maximum(b + 1, 0)) - 1 / (1 + np.exp(-b)), rtol=1e-5, atol=1e-6)


def test_int32_index_math_and_select():
    A = te.placeholder((10, 12), "int32", name="A")
    B = te.compute((10, 12), lambda i, j: te.if_then_else(A[i, j] % 3 == 0, A[i, j] // 3, -A[i, j]) + i * j,
                   name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(s[B].split(B.op.axis[1], 4)[1])
    a = rand((10, 12), "int32")
    (b,) = run(s, [A, B], [a])
    i, j = np.indices((10, 12))
    np.testing.assert_array_equal(b, np.where(a % 3 == 0, a // 3, -a) + i * j)


def test_fused_reduction_axes_and_where():
    A = te.placeholder((6, 5, 7), name="A")
    r1 = te.reduce_axis((0, 5), name="r1")
    r2 = te.reduce_axis((1, 7), name="r2")
    B = te.compute((6,), lambda i: te.sum(A[i, r1, r2], axis=[r1, r2], where=r1 != 2), name="B")
    s = te.create_schedule(B.op)
    s[B].fuse(r1, r2)
    a = rand((6, 5, 7))
    (b,) = run(s, [A, B], [a])
    mask = np.ones((5, 6), bool)
    mask[2] = False
    np.testing.assert_allclose(b, (a[:, :, 1:] * mask).sum(axis=(1, 2)), rtol=1e-5, atol=1e-5)
