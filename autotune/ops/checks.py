"""Argument checks shared by the op wrappers: every error names the op and the argument."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..dtype import dtype_info

FLOAT_DTYPES = ("float32", "float64")


def arrays(op: str, names: tuple[str, ...], values: tuple[Any, ...], ndims: tuple[int | None, ...]) -> str:
    """Check that each value is a numpy array of the given ndim (None: any) and all share a dtype
    that kernels support; return that dtype's name."""
    for name, a, nd in zip(names, values, ndims):
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{op}: argument {name} must be a numpy array, got {type(a).__name__}")
        if nd is not None and a.ndim != nd:
            raise ValueError(f"{op}: argument {name} must be {nd}-d, got shape {a.shape}")
    dtypes = {a.dtype for a in values}
    if len(dtypes) != 1:
        raise TypeError(f"{op}: arguments {', '.join(names)} must share a dtype, got "
                        + ", ".join(f"{n}={a.dtype}" for n, a in zip(names, values)))
    dtype = dtypes.pop().name
    try:
        dtype_info(dtype)
    except TypeError:
        raise TypeError(f"{op}: argument {names[0]} has dtype {dtype}, which kernels do not support") from None
    return dtype


def float_dtype(op: str, dtype: str, names: str = "x") -> str:
    """`dtype` when it is one float math runs on; else a TypeError naming the op and the argument(s)."""
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"{op}: argument {names} must be float32 or float64, got {dtype}")
    return dtype


def contiguous(*values: np.ndarray) -> list[np.ndarray]:
    """C-contiguous arrays, as kernels take them (inputs may alias each other: add(x, x) is fine)."""
    return [np.ascontiguousarray(a) for a in values]
