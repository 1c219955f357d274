"""2-d pooling of NCHW arrays: max_pool2d, avg_pool2d, global_avg_pool (PyTorch's conventions).

kernel_size, stride and padding are ints or (rows, columns) pairs; stride defaults to the
kernel size; output sizes round down (ceil_mode=False); max_pool2d can return the indices of its
maxima (`max_pool2d_indices`, ONNX MaxPool's second output). avg_pool2d averages the valid elements
of each window only (count_include_pad=False); padding is at most half the kernel.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime import load
from ..topi.pooling import plane_starts, pool_geometry
from .checks import arrays as checked_arrays, float_dtype


def _check(op: str, x: Any, float_only: bool) -> str:
    dtype = checked_arrays(op, ("x",), (x,), (4,))
    if float_only:
        float_dtype(op, dtype)
    if x.size == 0:
        raise ValueError(f"{op}: argument x is empty (shape {x.shape})")
    return dtype


def _pool(op: str, x: np.ndarray, kernel_size: Any, stride: Any, padding: Any, db: Any) -> np.ndarray:
    dtype = _check(op, x, float_only=op == "avg_pool2d")
    k, s, p, _ = pool_geometry(x.shape, kernel_size, stride, padding, op)
    kernel = load(op, db=db, dtype=dtype, shape=x.shape, kernel=k, stride=s, padding=p)
    return kernel(np.ascontiguousarray(x))


def max_pool2d(x: np.ndarray, kernel_size: Any, stride: Any = None, padding: Any = 0, db: Any = None,
               return_indices: bool = False) -> Any:
    """Window maximum; padding never wins (it is -inf). With `return_indices`, (values, indices):
    each maximum's position in its (H, W) plane, h * W + w, int64, the first of ties in row-major
    window order (PyTorch's return_indices; -1 for a window with no element equal to its max, NaN)."""
    y = _pool("max_pool2d", x, kernel_size, stride, padding, db)
    if not return_indices:
        return y
    k, s, p, out = pool_geometry(x.shape, kernel_size, stride, padding, "max_pool2d")
    kernel = load("max_pool2d_indices", db=db, dtype=str(y.dtype), shape=x.shape, out=out, kernel=k, stride=s,
                  padding=p, dilation=1, column_major=0)
    flat = kernel(np.ascontiguousarray(x), y)
    return y, np.where(flat < 0, -1, flat - plane_starts(x.shape))


def avg_pool2d(x: np.ndarray, kernel_size: Any, stride: Any = None, padding: Any = 0, db: Any = None) -> np.ndarray:
    """Window mean over the valid elements (count_include_pad=False)."""
    return _pool("avg_pool2d", x, kernel_size, stride, padding, db)


def global_avg_pool(x: np.ndarray, db: Any = None) -> np.ndarray:
    """Mean over H and W, shape (N, C, 1, 1)."""
    dtype = _check("global_avg_pool", x, float_only=True)
    kernel = load("global_avg_pool", db=db, dtype=dtype, shape=x.shape)
    return kernel(np.ascontiguousarray(x))
