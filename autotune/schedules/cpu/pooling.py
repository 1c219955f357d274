"""2-d pooling (NCHW) on the CPU: max_pool2d, avg_pool2d, global_avg_pool.

Shape parameters: `shape` (N, C, H, W); for max/avg pooling also `kernel`, `stride` and
`padding`, each an int or a pair (rows, columns). Average pooling divides by the number of
valid elements of each window (PyTorch's count_include_pad=False). The windowed pools use the
generic column schedule (window loops outside a vector of output columns, the padding inlined);
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
from .reduction import define_lanes


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
    schedule_column_reduction(cfg, s, y)
    return s, [x, y]


@template("max_pool2d", reference=_max_pool_reference,
          description="NCHW max pooling: kernel, stride, padding (ints or pairs); padding never wins")
def max_pool2d_template(cfg: Any, shape: Any, kernel: Any, stride: Any, padding: Any, dtype: str = "float32"):
    """Default: the generic column schedule's rule (blocks of 4 vectors, threads by work)."""
    return _pool(cfg, "max_pool2d", shape, kernel, stride, padding, dtype)


@template("avg_pool2d", reference=_avg_pool_reference,
          description="NCHW average pooling over valid elements (count_include_pad=False)")
def avg_pool2d_template(cfg: Any, shape: Any, kernel: Any, stride: Any, padding: Any, dtype: str = "float32"):
    """Default: the generic column schedule's rule (blocks of 4 vectors, threads by work)."""
    return _pool(cfg, "avg_pool2d", shape, kernel, stride, padding, dtype)


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
