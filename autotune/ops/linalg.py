"""Linear-algebra ops: matmul, batch_matmul, dense (+bias+relu), conv2d NCHW."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime import load
from .checks import arrays as _arrays, contiguous as _contiguous


def matmul(a: np.ndarray, b: np.ndarray, db: Any = None) -> np.ndarray:
    """a @ b for 2-d a (M x K) and b (K x N)."""
    dtype = _arrays("matmul", ("a", "b"), (a, b), (2, 2))
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: a is {a.shape} and b is {b.shape}; a.shape[1] must equal b.shape[0]")
    M, K = a.shape
    kernel = load("matmul", db=db, dtype=dtype, M=M, N=b.shape[1], K=K)
    return kernel(*_contiguous(a, b))


def batch_matmul(a: np.ndarray, b: np.ndarray, db: Any = None) -> np.ndarray:
    """a[i] @ b[i] for 3-d a (batch x M x K) and b (batch x K x N)."""
    dtype = _arrays("batch_matmul", ("a", "b"), (a, b), (3, 3))
    if a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ValueError(f"batch_matmul: a is {a.shape} and b is {b.shape}; batch sizes must match and "
                         "a.shape[2] must equal b.shape[1]")
    batch, M, K = a.shape
    kernel = load("batch_matmul", db=db, dtype=dtype, batch=batch, M=M, N=b.shape[2], K=K)
    return kernel(*_contiguous(a, b))


def dense(x: np.ndarray, w: np.ndarray, bias: np.ndarray, db: Any = None) -> np.ndarray:
    """relu(x @ w.T + bias) for x (M x K), w (N x K), bias (N,), in one fused kernel."""
    dtype = _arrays("dense", ("x", "w", "bias"), (x, w, bias), (2, 2, 1))
    if x.shape[1] != w.shape[1] or bias.shape[0] != w.shape[0]:
        raise ValueError(f"dense: x is {x.shape}, w is {w.shape}, bias is {bias.shape}; need x.shape[1] == "
                         "w.shape[1] and bias.shape[0] == w.shape[0]")
    kernel = load("dense", db=db, dtype=dtype, M=x.shape[0], N=w.shape[0], K=x.shape[1])
    return kernel(*_contiguous(x, w, bias))


def conv2d(x: np.ndarray, w: np.ndarray, stride: int = 1, padding: int = 0, db: Any = None) -> np.ndarray:
    """NCHW conv2d of x (N x C x H x W) with w (F x C x KH x KW)."""
    dtype = _arrays("conv2d", ("x", "w"), (x, w), (4, 4))
    if x.shape[1] != w.shape[1]:
        raise ValueError(f"conv2d: x has {x.shape[1]} channels but w expects {w.shape[1]} (x {x.shape}, w {w.shape})")
    N, C, H, W = x.shape
    F, _, KH, KW = w.shape
    kernel = load("conv2d", db=db, dtype=dtype, N=N, C=C, H=H, W=W, F=F, KH=KH, KW=KW, stride=stride,
                  padding=padding)
    return kernel(*_contiguous(x, w))
