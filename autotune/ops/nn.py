"""Normalization, softmax family, attention and loss ops: each one fused kernel.

Row ops (softmax, log_softmax, layer_norm, rms_norm) normalize over the last axis of an array of
any rank: the array is viewed as rows x row length, which is the kernel's (M, N) workload.
Float arguments (eps, scale) are float task parameters, so a workload key reads e.g.
`layer_norm(M=4096,N=1024,eps=1e-05)float32`; attention's default scale 1/sqrt(head_dim) is the
parameter 0.0, whether implicit or passed explicitly.
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from ..runtime import load
from ..schedules.cpu.nn import DEFAULT_SCALE
from .checks import arrays as _arrays, contiguous as _contiguous, float_dtype


def _float_param(op: str, name: str, value: Any, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: {name} must be a float, got {type(value).__name__} {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0 or (positive and v == 0):
        raise ValueError(f"{op}: {name} must be finite and {'> 0' if positive else '>= 0'}, got {value!r}")
    return v


def _rows(op: str, x: np.ndarray) -> tuple[int, int]:
    if x.ndim < 1:
        raise ValueError(f"{op}: argument x must have at least 1 dimension, got a scalar")
    n = x.shape[-1]
    return (x.size // n if n else 0), n


def _row_op(op: str, x: np.ndarray, extra: tuple[np.ndarray, ...], db: Any, **params: Any) -> np.ndarray:
    m, n = _rows(op, x)
    if x.size == 0:
        return np.empty_like(x)
    kernel = load(op, db=db, dtype=x.dtype.name, M=m, N=n, **params)
    return kernel(*_contiguous(x.reshape(m, n), *extra)).reshape(x.shape)


def _check_feature(op: str, name: str, t: np.ndarray, n: int, x_shape: tuple[int, ...]) -> None:
    if t.shape != (n,):
        raise ValueError(f"{op}: argument {name} must have shape ({n},) to match the last axis of x {x_shape}, "
                         f"got {t.shape}")


def softmax(x: np.ndarray, db: Any = None) -> np.ndarray:
    """exp(x - max) / sum(exp(x - max)) over the last axis of x."""
    float_dtype("softmax", _arrays("softmax", ("x",), (x,), (None,)), "x")
    return _row_op("softmax", x, (), db)


def log_softmax(x: np.ndarray, db: Any = None) -> np.ndarray:
    """x - logsumexp(x) over the last axis of x (max-shifted: no overflow)."""
    float_dtype("log_softmax", _arrays("log_softmax", ("x",), (x,), (None,)), "x")
    return _row_op("log_softmax", x, (), db)


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float = 1e-5, db: Any = None) -> np.ndarray:
    """(x - mean) / sqrt(var + eps) * gamma + beta over the last axis (biased variance)."""
    dtype = _arrays("layer_norm", ("x", "gamma", "beta"), (x, gamma, beta), (None, 1, 1))
    float_dtype("layer_norm", dtype, "x, gamma and beta")
    _, n = _rows("layer_norm", x)
    _check_feature("layer_norm", "gamma", gamma, n, x.shape)
    _check_feature("layer_norm", "beta", beta, n, x.shape)
    return _row_op("layer_norm", x, (gamma, beta), db, eps=_float_param("layer_norm", "eps", eps))


def rms_norm(x: np.ndarray, gamma: np.ndarray, eps: float = 1e-6, db: Any = None) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * gamma over the last axis."""
    dtype = _arrays("rms_norm", ("x", "gamma"), (x, gamma), (None, 1))
    float_dtype("rms_norm", dtype, "x and gamma")
    _, n = _rows("rms_norm", x)
    _check_feature("rms_norm", "gamma", gamma, n, x.shape)
    return _row_op("rms_norm", x, (gamma,), db, eps=_float_param("rms_norm", "eps", eps))


def batch_norm(x: np.ndarray, mean: np.ndarray, var: np.ndarray, gamma: np.ndarray, beta: np.ndarray,
               eps: float = 1e-5, db: Any = None) -> np.ndarray:
    """Inference batch norm of NCHW x: (x - mean[c]) / sqrt(var[c] + eps) * gamma[c] + beta[c]."""
    names = ("x", "mean", "var", "gamma", "beta")
    dtype = _arrays("batch_norm", names, (x, mean, var, gamma, beta), (4, 1, 1, 1, 1))
    float_dtype("batch_norm", dtype, ", ".join(names))
    c = x.shape[1]
    for name, t in zip(names[1:], (mean, var, gamma, beta)):
        if t.shape != (c,):
            raise ValueError(f"batch_norm: argument {name} must have shape ({c},) (one value per channel of x "
                             f"{x.shape}), got {t.shape}")
    e = _float_param("batch_norm", "eps", eps)
    if x.size == 0:
        return np.empty_like(x)
    N, C, H, W = x.shape
    kernel = load("batch_norm", db=db, dtype=dtype, N=N, C=C, H=H, W=W, eps=e)
    return kernel(*_contiguous(x, mean, var, gamma, beta))


def instance_norm(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, eps: float = 1e-5,
                  db: Any = None) -> np.ndarray:
    """Instance norm of x (N, C, *spatial): per (n, c) plane (x - mean) / sqrt(var + eps) * scale[c]
    + bias[c], the plane's mean and biased variance (ONNX InstanceNormalization)."""
    names = ("x", "scale", "bias")
    dtype = _arrays("instance_norm", names, (x, scale, bias), (None, 1, 1))
    float_dtype("instance_norm", dtype, ", ".join(names))
    if x.ndim < 3:
        raise ValueError(f"instance_norm: argument x must be (N, C, *spatial) with a spatial axis, got shape {x.shape}")
    for name, t in (("scale", scale), ("bias", bias)):
        if t.shape != (x.shape[1],):
            raise ValueError(f"instance_norm: argument {name} must have shape ({x.shape[1]},) (one value per channel "
                             f"of x {x.shape}), got {t.shape}")
    e = _float_param("instance_norm", "eps", eps)
    if x.size == 0:
        return np.empty_like(x)
    kernel = load("instance_norm", db=db, dtype=dtype, shape=x.shape, eps=e)
    return kernel(*_contiguous(x, scale, bias))


def cross_entropy(logits: np.ndarray, labels: np.ndarray, db: Any = None) -> np.ndarray:
    """Per-row softmax cross-entropy: logsumexp(logits[i]) - logits[i, labels[i]], shape (N,)."""
    dtype = _arrays("cross_entropy", ("logits",), (logits,), (2,))
    float_dtype("cross_entropy", dtype, "logits")
    if not isinstance(labels, np.ndarray):
        raise TypeError(f"cross_entropy: argument labels must be a numpy array, got {type(labels).__name__}")
    if labels.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: argument labels must hold integers, got {labels.dtype}")
    n, c = logits.shape
    if labels.shape != (n,):
        raise ValueError(f"cross_entropy: argument labels must have shape ({n},) (one per row of logits "
                         f"{logits.shape}), got {labels.shape}")
    if n and c == 0:
        raise ValueError(f"cross_entropy: argument logits has no classes (shape {logits.shape})")
    if n and (labels.min() < 0 or labels.max() >= c):
        bad = labels[(labels < 0) | (labels >= c)][0]
        raise ValueError(f"cross_entropy: argument labels must lie in [0, {c}), found {bad}")
    if n == 0:
        return np.empty((0,), logits.dtype)
    kernel = load("cross_entropy", db=db, dtype=dtype, N=n, C=c)
    return kernel(*_contiguous(logits, labels.astype(np.int32)))


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, causal: bool = False, scale: float | None = None,
              db: Any = None) -> np.ndarray:
    """softmax(q @ k^T * scale [causal: key j <= query i]) @ v for (batch, heads, seq, head_dim) arrays,
    in one fused kernel; scale defaults to 1/sqrt(head_dim)."""
    dtype = _arrays("attention", ("q", "k", "v"), (q, k, v), (4, 4, 4))
    float_dtype("attention", dtype, "q, k and v")
    B, H, Sq, D = q.shape
    Sk = k.shape[2]
    if k.shape[:2] != (B, H) or k.shape[3] != D:
        raise ValueError(f"attention: argument k must be ({B}, {H}, seq_k, {D}) to match q {q.shape}, got {k.shape}")
    if v.shape != k.shape:
        raise ValueError(f"attention: argument v must have the shape of k {k.shape}, got {v.shape}")
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"attention: causal must be a bool, got {type(causal).__name__} {causal!r}")
    value = None if scale is None else _float_param("attention", "scale", scale, positive=True)
    sc = DEFAULT_SCALE if value is None or (D and value == 1.0 / math.sqrt(D)) else value
    if q.size == 0:
        return np.empty_like(q)
    if Sk == 0:
        raise ValueError(f"attention: argument k has no keys (shape {k.shape})")
    kernel = load("attention", db=db, dtype=dtype, batch=B, heads=H, seq_q=Sq, seq_k=Sk, head_dim=D,
                  causal=int(bool(causal)), scale=sc)
    return kernel(*_contiguous(q, k, v))
