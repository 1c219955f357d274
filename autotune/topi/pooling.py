"""2-d pooling on NCHW tensors as te computes: max_pool2d, avg_pool2d, global_avg_pool, and the
argmax of max pooling's windows (max_pool2d_indices).

Windows: out[n, c, y, x] covers rows y*sh - ph .. y*sh - ph + kh - 1 (columns alike), output
size floor((H + 2*ph - kh) / sh) + 1 (PyTorch's ceil_mode=False). Padding never contributes:
max pooling pads with -inf, and average pooling divides by the number of valid (non-padding)
elements of each window (PyTorch's count_include_pad=False, TVM's default).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import te
from ..dtype import is_float
from ..te.expr import Expr
from . import reduction
from .elementwise import float_only

POOL = "pool"


def _pair(v: Any, name: str, op: str) -> tuple[int, int]:
    t = (v, v) if isinstance(v, int) else tuple(v) if isinstance(v, (tuple, list)) else ()
    if len(t) != 2 or not all(isinstance(e, int) and not isinstance(e, bool) for e in t):
        raise ValueError(f"{op}: {name} must be an int or a pair of ints, got {v!r}")
    return t


def pool_geometry(shape: Sequence[int], kernel: Any, stride: Any = None, padding: Any = 0,
                  op: str = "pool2d") -> tuple[tuple[int, int], tuple[int, int], tuple[int, int], tuple[int, int]]:
    """(kernel, stride, padding, output size), checked; stride defaults to the kernel."""
    if len(shape) != 4:
        raise ValueError(f"{op}: input must be 4-d NCHW, got shape {tuple(shape)}")
    k = _pair(kernel, "kernel", op)
    s = k if stride is None else _pair(stride, "stride", op)
    p = _pair(padding, "padding", op)
    H, W = shape[2], shape[3]
    if min(k) < 1 or min(s) < 1 or min(p) < 0:
        raise ValueError(f"{op}: kernel and stride must be >= 1 and padding >= 0, got kernel={k}, stride={s}, "
                         f"padding={p}")
    if p[0] * 2 > k[0] or p[1] * 2 > k[1]:
        raise ValueError(f"{op}: padding {p} must be at most half the kernel {k} (every window needs a valid element)")
    if H + 2 * p[0] < k[0] or W + 2 * p[1] < k[1]:
        raise ValueError(f"{op}: kernel {k} is larger than the padded input {H + 2 * p[0]}x{W + 2 * p[1]}")
    out = ((H + 2 * p[0] - k[0]) // s[0] + 1, (W + 2 * p[1] - k[1]) // s[1] + 1)
    return k, s, p, out


def _window_reduce(x: te.Tensor, kernel: Any, stride: Any, padding: Any, combiner: Any, fill: float,
                   op: str, name: str) -> tuple[te.Tensor, tuple]:
    k, s, p, (OH, OW) = pool_geometry(x.shape, kernel, stride, padding, op)
    N, C, H, W = x.shape
    src = x
    if p != (0, 0):
        src = te.compute((N, C, H + 2 * p[0], W + 2 * p[1]), lambda n, c, h, w: te.if_then_else(
            te.all(h >= p[0], h < H + p[0], w >= p[1], w < W + p[1]), x[n, c, h - p[0], w - p[1]],
            te.const(fill, x.dtype)), name=f"{op}.pad", tag="injective")
    ry = te.reduce_axis((0, k[0]), name="ry")
    rx = te.reduce_axis((0, k[1]), name="rx")
    out = te.compute((N, C, OH, OW), lambda n, c, y, x_: combiner(
        src[n, c, y * s[0] + ry, x_ * s[1] + rx], axis=[ry, rx]), name=name, tag=POOL)
    return out, (k, s, p, H, W)


def max_pool2d(x: te.Tensor, kernel: Any, stride: Any = None, padding: Any = 0) -> te.Tensor:
    lowest = float("-inf") if is_float(x.dtype) else -(2 ** 31)
    return _window_reduce(x, kernel, stride, padding, te.max, lowest, "max_pool2d", "max_pool2d")[0]


def _valid(o: Expr, stride: int, pad: int, k: int, n: int) -> Expr:
    """How many of the window's k positions o*stride - pad + [0, k) fall inside [0, n)."""
    start = o * stride - pad
    return te.minimum(start + k, te.const(n, "int32")) - te.maximum(start, te.const(0, "int32"))


def avg_pool2d(x: te.Tensor, kernel: Any, stride: Any = None, padding: Any = 0) -> te.Tensor:
    """Window mean over the valid elements (count_include_pad=False); float tensors."""
    float_only("avg_pool2d", x)
    total, (k, s, p, H, W) = _window_reduce(x, kernel, stride, padding, te.sum, 0.0, "avg_pool2d", "avg_pool2d.sum")
    if p == (0, 0):
        inv = te.const(1.0 / (k[0] * k[1]), x.dtype)
        return te.compute(total.shape, lambda n, c, y, x_: total[n, c, y, x_] * inv, name="avg_pool2d", tag="elemwise")

    def body(n: Any, c: Any, y: Any, x_: Any) -> Expr:
        count = _valid(y, s[0], p[0], k[0], H) * _valid(x_, s[1], p[1], k[1], W)
        return total[n, c, y, x_] / count.astype(x.dtype)

    return te.compute(total.shape, body, name="avg_pool2d", tag="elemwise")


def max_pool2d_indices(x: te.Tensor, y: te.Tensor, kernel: Any, stride: Any, padding: Any, dilation: Any,
                       column_major: bool = False) -> te.Tensor:
    """int64 index, in x flattened, of the first element of each pooling window equal to the
    window's max `y` (ONNX MaxPool's `Indices`): windows start at o * stride - padding (the
    leading pads; the trailing ones only shape y) and step by `dilation`; padding never matches.
    "First" is in row-major window order, as ONNX's reference finds it; `column_major` (ONNX's
    storage_order=1) numbers a position h + w * H instead of h * W + w. A window without an
    element equal to its max (none inside the input, or NaN) gives -1."""
    op = "max_pool2d_indices"
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (_pair(v, n, op) for v, n in
                                              ((kernel, "kernel"), (stride, "stride"), (padding, "padding"),
                                               (dilation, "dilation")))
    if len(x.shape) != 4 or len(y.shape) != 4 or tuple(y.shape[:2]) != tuple(x.shape[:2]):
        raise ValueError(f"{op}: x and y must be 4-d NCHW of the same N and C, got {x.shape} and {y.shape}")
    if min(kh, kw, sh, sw, dh, dw) < 1 or min(ph, pw) < 0:
        raise ValueError(f"{op}: kernel, stride and dilation must be >= 1 and padding >= 0")
    _, C, H, W = x.shape
    plane = H * W
    ry, rx = te.reduce_axis((0, kh), name="ry"), te.reduce_axis((0, kw), name="rx")

    def first(n: Any, c: Any, oy: Any, ox: Any) -> Expr:
        h, w = oy * sh - ph + ry * dh, ox * sw - pw + rx * dw
        inside = te.all(h >= 0, h < H, w >= 0, w < W)
        value = x[n, c, te.maximum(te.minimum(h, H - 1), 0), te.maximum(te.minimum(w, W - 1), 0)]
        hit = te.all(inside, value == y[n, c, oy, ox])
        return te.min(te.if_then_else(hit, h * W + w, te.const(plane, "int32")), axis=[ry, rx])

    found = te.compute(y.shape, first, name=f"{op}.first", tag=POOL)

    def flat(n: Any, c: Any, oy: Any, ox: Any) -> Expr:
        k = found[n, c, oy, ox]
        within = k // W + k % W * H if column_major else k
        index = (n * C + c).astype("int64") * plane + within.astype("int64")
        return te.if_then_else(k < plane, index, te.const(-1, "int64"))

    return te.compute(y.shape, flat, name=op, tag="elemwise")


def plane_starts(shape: Sequence[int]) -> np.ndarray:
    """Where each (n, c) plane of an NCHW array of `shape` starts in it flattened, shaped
    (N, C, 1, 1): what `max_pool2d_indices` adds to a position within its plane."""
    N, C, H, W = shape
    return (np.arange(N * C, dtype=np.int64) * (H * W)).reshape(N, C, 1, 1)


def global_avg_pool(x: te.Tensor, lanes: int = 1) -> te.Tensor:
    """The mean over H and W: shape (N, C, 1, 1) (PyTorch's adaptive_avg_pool2d(x, 1)); `lanes`
    as in `autotune.topi.reduction.mean`."""
    if len(x.shape) != 4:
        raise ValueError(f"global_avg_pool: input must be 4-d NCHW, got shape {x.shape}")
    float_only("global_avg_pool", x)
    return reduction.mean(x, (2, 3), keepdims=True, lanes=lanes)
