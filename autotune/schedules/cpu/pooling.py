"""2-d pooling (NCHW) on the CPU: max_pool2d, avg_pool2d, global_avg_pool, max_pool2d_indices.

Shape parameters: `shape` (N, C, H, W); for max/avg pooling also `kernel`, `stride` and
`padding`, each an int or a pair (rows, columns). Average pooling divides by the number of
valid elements of each window (PyTorch's count_include_pad=False). The windowed pools use the
generic column schedule (window loops outside a vector of output columns, the padding inlined;
its default block for windows, `generic.column_block`);
global_avg_pool is the mean over (H, W) with the row schedule (one (n, c) plane per parallel
iteration, lane partials by the `lanes` knob).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ... import te
from ...topi import pooling as topi
from ..generic import schedule_column_reduction, schedule_row_reduction
from ..task import template
from .elementwise import as_shape
from .reduction import define_lanes, schedule_reduction


def _windows(x: np.ndarray, kernel: Any, stride: Any, padding: Any, fill: float, op: str) -> np.ndarray:
    """(N, C, OH, OW, kh, kw) windows of x padded with `fill`."""
    (kh, kw), (sh, sw), (ph, pw), (oh, ow) = topi.pool_geometry(x.shape, kernel, stride, padding, op)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))
    return win[:, :, ::sh, ::sw][:, :, :oh, :ow]


def _max_pool_reference(x: np.ndarray, kernel: Any, stride: Any, padding: Any, **_: Any) -> np.ndarray:
    return _windows(x, kernel, stride, padding, -np.inf, "max_pool2d").max(axis=(4, 5)).astype(x.dtype)


def _avg_pool_reference(x: np.ndarray, kernel: Any, stride: Any, padding: Any, **_: Any) -> np.ndarray:
    total = _windows(x, kernel, stride, padding, 0.0, "avg_pool2d").sum(axis=(4, 5))
    count = _windows(np.ones_like(x), kernel, stride, padding, 0.0, "avg_pool2d").sum(axis=(4, 5))
    return (total / count).astype(x.dtype)


def _pool(cfg: Any, op: str, shape: Any, kernel: Any, stride: Any, padding: Any, dtype: str):
    x = te.placeholder(as_shape(shape, op, "shape"), dtype, name="x")
    y = (topi.max_pool2d if op == "max_pool2d" else topi.avg_pool2d)(x, kernel, stride, padding)
    s = te.create_schedule(y.op)
    schedule_column_reduction(cfg, s, y, windows=True)
    return s, [x, y]


@template("max_pool2d", reference=_max_pool_reference,
          description="NCHW max pooling: kernel, stride, padding (ints or pairs); padding never wins")
def max_pool2d_template(cfg: Any, shape: Any, kernel: Any, stride: Any, padding: Any, dtype: str = "float32"):
    """Default: the generic column schedule's rule for windows (one vector a block, threads by work)."""
    return _pool(cfg, "max_pool2d", shape, kernel, stride, padding, dtype)


@template("avg_pool2d", reference=_avg_pool_reference,
          description="NCHW average pooling over valid elements (count_include_pad=False)")
def avg_pool2d_template(cfg: Any, shape: Any, kernel: Any, stride: Any, padding: Any, dtype: str = "float32"):
    """Default: the generic column schedule's rule for windows (one vector a block, threads by work)."""
    return _pool(cfg, "avg_pool2d", shape, kernel, stride, padding, dtype)


def _max_pool_indices_reference(x: np.ndarray, y: np.ndarray, kernel: Any, stride: Any, padding: Any, dilation: Any,
                                column_major: int, **_: Any) -> np.ndarray:
    """ONNX's reference search, by whole windows positions at a time: the first position in
    row-major window order that is inside x and equals y, else -1."""
    H, W = x.shape[2:]
    OH, OW = y.shape[2:]
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = (np.broadcast_to(v, 2) for v in (kernel, stride, padding, dilation))
    found = np.full(y.shape, -1, np.int64)
    for ry in range(kh):
        for rx in range(kw):
            h = np.arange(OH) * sh - ph + ry * dh
            w = np.arange(OW) * sw - pw + rx * dw
            inside = ((h >= 0) & (h < H))[:, None] & ((w >= 0) & (w < W))[None, :]
            value = x[:, :, np.clip(h, 0, H - 1)][:, :, :, np.clip(w, 0, W - 1)]
            where = h[:, None] + w[None, :] * H if column_major else h[:, None] * W + w[None, :]
            new = (found < 0) & inside & (value == y)
            found[new] = np.broadcast_to(where, y.shape)[new]
    return np.where(found < 0, -1, found + topi.plane_starts(x.shape))


@template("max_pool2d_indices", reference=_max_pool_indices_reference,
          description="int64 index in x flattened of the first element of each window equal to the pooled y "
                      "(ONNX MaxPool's Indices); column_major 0/1 (storage_order)")
def max_pool2d_indices_template(cfg: Any, shape: Any, out: Any, kernel: Any, stride: Any, padding: Any,
                                dilation: Any, column_major: int, dtype: str = "float32"):
    """x (shape) and y (N, C, *out) in, int64 indices out. Default: the reduction's generic
    schedule rule (`schedule_reduction`: rows or columns, threads by work)."""
    x = te.placeholder(as_shape(shape, "max_pool2d_indices", "shape"), dtype, name="x")
    pooled = as_shape(out, "max_pool2d_indices", "out")
    if len(pooled) != 2 or column_major not in (0, 1) or isinstance(column_major, bool):
        raise ValueError(f"max_pool2d_indices: out must be (OH, OW) and column_major 0 or 1, got {out!r}, "
                         f"{column_major!r}")
    y = te.placeholder((*x.shape[:2], *pooled), dtype, name="y")
    idx = topi.max_pool2d_indices(x, y, kernel, stride, padding, dilation, bool(column_major))
    s = te.create_schedule(idx.op)
    schedule_reduction(cfg, s, idx)
    return s, [x, y, idx]


def _global_avg_reference(x: np.ndarray, **_: Any) -> np.ndarray:
    return x.astype(np.float64).mean(axis=(2, 3), keepdims=True).astype(x.dtype)


@template("global_avg_pool", reference=_global_avg_reference,
          description="NCHW mean over H and W, shape (N, C, 1, 1)")
def global_avg_pool_template(cfg: Any, shape: Any, dtype: str = "float32"):
    """Default: `define_lanes`'s rule (one vector of partial sums), threads by work."""
    x = te.placeholder(as_shape(shape, "global_avg_pool", "shape"), dtype, name="x")
    y = topi.global_avg_pool(x, lanes=define_lanes(cfg, x.shape, (2, 3), "global_avg_pool", dtype))
    s = te.create_schedule(y.op)
    schedule_row_reduction(cfg, s, y)
    return s, [x, y]
