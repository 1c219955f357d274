"""resize: ONNX Resize (nearest, linear, cubic; antialias) of any axes of an array, to an explicit
output shape.

Checks its arguments, naming the op and the argument in every error, then runs the best known
kernels (`autotune.load`): nearest and linear as one resize kernel (semantics in
`autotune.topi.resize`); cubic, antialias and nearest with exclude_outside as one resample kernel
per resized axis, on tap tables built in float64 (`autotune.topi.resample`).
"""
from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..runtime import load
from ..topi.resample import MODES, one_pass, resize_tables
from ..topi.resize import COORDS, NEAREST
from .checks import arrays as checked_arrays, float_dtype


def resize(x: np.ndarray, out_shape: Sequence[int], mode: str = "nearest", coord: str = "half_pixel",
           nearest: str = "round_prefer_floor", cubic_a: float = -0.75, exclude_outside: bool = False,
           antialias: bool = False, db: Any = None) -> np.ndarray:
    """x resized to `out_shape` (one extent per axis): mode "nearest" (rounded by `nearest`),
    "linear" (n-linear over the resized axes) or "cubic" (Keys' kernel with parameter `cubic_a`),
    source coordinates by `coord`; `antialias` widens the linear or cubic kernel when shrinking,
    `exclude_outside` drops the taps past the border. ONNX's defaults."""
    dtype = checked_arrays("resize", ("x",), (x,), (None,))
    for name, value, allowed in (("mode", mode, MODES), ("coord", coord, COORDS), ("nearest", nearest, NEAREST)):
        if value not in allowed:
            raise ValueError(f"resize: argument {name} must be one of {', '.join(allowed)}, got {value!r}")
    if antialias and mode == "nearest":
        raise ValueError("resize: argument antialias applies to modes linear and cubic, not nearest")
    tables = not one_pass(mode, coord, antialias, exclude_outside)
    if mode != "nearest" or tables:
        float_dtype("resize", dtype)
    if x.ndim == 0 or x.size == 0:
        raise ValueError(f"resize: argument x must have at least one element and one axis, got shape {x.shape}")
    if not (isinstance(out_shape, (tuple, list)) and len(out_shape) == x.ndim
            and all(isinstance(d, numbers.Integral) and not isinstance(d, bool) and int(d) > 0 for d in out_shape)):
        raise ValueError(f"resize: argument out_shape must be {x.ndim} positive ints (one per axis of x {x.shape}), "
                         f"got {out_shape!r}")
    out = tuple(int(d) for d in out_shape)
    if not tables:
        kernel = load("resize", db=db, dtype=dtype, shape=x.shape, out_shape=out, mode=mode, coord=coord,
                      nearest=nearest)
        return kernel(np.ascontiguousarray(x))
    try:
        steps = resize_tables(x.shape, out, [o / i for i, o in zip(x.shape, out)], mode, coord, nearest,
                              float(cubic_a), bool(exclude_outside), bool(antialias))
    except ValueError as e:
        raise ValueError(f"resize: {e}") from None
    y = np.ascontiguousarray(x)
    for axis, indices, weights in steps:
        kernel = load("resample", db=db, dtype=dtype, shape=y.shape, axis=axis, out_extent=out[axis],
                      taps=indices.shape[1])
        y = kernel(y, indices, weights.astype(dtype))
    return y.copy() if y is x else y
