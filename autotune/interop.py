"""Arrays from other libraries: anything exporting `__dlpack__` (PyTorch, JAX, CuPy on the host,
numpy itself) or `__array_interface__` becomes a numpy array viewing the same memory.

Kernels and compiled models take their inputs through here, so a caller's tensor is read in place:
no copy is made unless the layout needs one (the kernels read C-contiguous memory only).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .errors import ArgumentError


def as_numpy(obj: Any, what: str) -> np.ndarray:
    """`obj` as a numpy array sharing its memory; ArgumentError naming `what` when `obj` is no array."""
    if isinstance(obj, np.ndarray):
        return obj
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        try:
            return np.from_dlpack(obj)
        except (BufferError, RuntimeError, TypeError) as exc:   # e.g. a device tensor: not host memory
            raise ArgumentError(f"{what}: cannot read this {type(obj).__name__} through DLPack: {exc}") from None
    if hasattr(obj, "__array_interface__"):
        return np.asarray(obj)
    raise ArgumentError(f"{what}: expected a numpy array or an object with __dlpack__ or "
                        f"__array_interface__, got {type(obj).__name__}")


def contiguous(a: np.ndarray) -> np.ndarray:
    """`a` itself when C-contiguous and aligned, else a C-contiguous copy (the one copy a layout forces)."""
    if a.flags.c_contiguous and a.flags.aligned:
        return a
    return np.array(a, order="C", copy=True)    # ascontiguousarray keeps a contiguous misaligned array
