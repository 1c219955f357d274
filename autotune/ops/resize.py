"""resize: ONNX Resize (nearest, linear) of any axes of an array, to an explicit output shape.

Checks its arguments, naming the op and the argument in every error, then runs the best known
kernel (`autotune.load`). Semantics in `autotune.topi.resize`.
"""
from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..runtime import load
from ..topi.resize import COORDS, MODES, NEAREST
from .checks import arrays as checked_arrays, float_dtype


def resize(x: np.ndarray, out_shape: Sequence[int], mode: str = "nearest", coord: str = "half_pixel",
           nearest: str = "round_prefer_floor", db: Any = None) -> np.ndarray:
    """x resized to `out_shape` (one extent per axis): mode "nearest" (rounded by `nearest`) or
    "linear" (n-linear over the resized axes), source coordinates by `coord`; ONNX's defaults."""
    dtype = checked_arrays("resize", ("x",), (x,), (None,))
    for name, value, allowed in (("mode", mode, MODES), ("coord", coord, COORDS), ("nearest", nearest, NEAREST)):
        if value not in allowed:
            raise ValueError(f"resize: argument {name} must be one of {', '.join(allowed)}, got {value!r}")
    if mode == "linear":
        float_dtype("resize", dtype)
    if x.ndim == 0 or x.size == 0:
        raise ValueError(f"resize: argument x must have at least one element and one axis, got shape {x.shape}")
    if not (isinstance(out_shape, (tuple, list)) and len(out_shape) == x.ndim
            and all(isinstance(d, numbers.Integral) and not isinstance(d, bool) and int(d) > 0 for d in out_shape)):
        raise ValueError(f"resize: argument out_shape must be {x.ndim} positive ints (one per axis of x {x.shape}), "
                         f"got {out_shape!r}")
    out = tuple(int(d) for d in out_shape)
    kernel = load("resize", db=db, dtype=dtype, shape=x.shape, out_shape=out, mode=mode, coord=coord,
                  nearest=nearest)
    return kernel(np.ascontiguousarray(x))
