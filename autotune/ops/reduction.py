"""Reductions: sum, mean, max, min, argmax, argmin, var over any axes, with keepdims (numpy's signatures).

`axis` is None (every axis), an int or a tuple of ints (negative allowed). A full reduction
without keepdims returns a 0-d array, as numpy does. Differences from numpy, by design: sum of
an integer array stays in its dtype (numpy widens to int64); argmax and argmin over several
axes return the index within the row-major flattening of those axes (numpy only takes one axis
or None, and None matches); they return int32.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..runtime import load
from ..topi.reduction import normalize_axes, reduced_shape
from .checks import arrays as checked_arrays, float_dtype


def _reduce(op: str, x: Any, axis: Any, keepdims: bool, db: Any, float_only: bool = False) -> np.ndarray:
    dtype = checked_arrays(op, ("x",), (x,), (None,))
    if float_only:
        float_dtype(op, dtype)
    if x.ndim == 0:
        raise ValueError(f"{op}: argument x is a 0-d array; reduce an array of at least 1 dimension")
    if not isinstance(keepdims, (bool, np.bool_)) and keepdims not in (0, 1):
        raise TypeError(f"{op}: argument keepdims must be a bool, got {keepdims!r}")
    if axis is not None and not isinstance(axis, int) and not (
            isinstance(axis, (tuple, list)) and all(isinstance(a, int) for a in axis)):
        raise TypeError(f"{op}: argument axis must be None, an int or a tuple of ints, got {axis!r}")
    try:
        axes = normalize_axes(x.ndim, axis, op)
    except ValueError as e:
        raise ValueError(f"{e} (argument axis, x of shape {x.shape})") from None
    numpy_shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape)) if keepdims else \
        tuple(n for d, n in enumerate(x.shape) if d not in axes)
    if x.size == 0:
        raise ValueError(f"{op}: argument x is empty (shape {x.shape}); there is nothing to reduce")
    kernel = load(op, db=db, dtype=dtype, shape=x.shape, axes=axes, keepdims=int(bool(keepdims)))
    out = kernel(np.ascontiguousarray(x))
    assert out.shape == reduced_shape(x.shape, axes, bool(keepdims))
    return out.reshape(numpy_shape)


def sum(x: np.ndarray, axis: Any = None, keepdims: bool = False, db: Any = None) -> np.ndarray:
    """Sum over `axis`, in x's dtype."""
    return _reduce("sum", x, axis, keepdims, db)


def mean(x: np.ndarray, axis: Any = None, keepdims: bool = False, db: Any = None) -> np.ndarray:
    """Mean over `axis` (float arrays)."""
    return _reduce("mean", x, axis, keepdims, db, float_only=True)


def max(x: np.ndarray, axis: Any = None, keepdims: bool = False, db: Any = None) -> np.ndarray:
    """Maximum over `axis`."""
    return _reduce("max", x, axis, keepdims, db)


def min(x: np.ndarray, axis: Any = None, keepdims: bool = False, db: Any = None) -> np.ndarray:
    """Minimum over `axis`."""
    return _reduce("min", x, axis, keepdims, db)


def argmax(x: np.ndarray, axis: Any = None, keepdims: bool = False, db: Any = None) -> np.ndarray:
    """int32 index of the first maximum over `axis` (see the module docstring for several axes)."""
    return _reduce("argmax", x, axis, keepdims, db)


def argmin(x: np.ndarray, axis: Any = None, keepdims: bool = False, db: Any = None) -> np.ndarray:
    """int32 index of the first minimum over `axis` (see the module docstring for several axes)."""
    return _reduce("argmin", x, axis, keepdims, db)


def var(x: np.ndarray, axis: Any = None, keepdims: bool = False, db: Any = None) -> np.ndarray:
    """Population variance (np.var, ddof=0) over `axis` (float arrays)."""
    return _reduce("var", x, axis, keepdims, db, float_only=True)
