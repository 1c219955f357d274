"""Resize (ONNX Resize, modes nearest and linear) as a te compute, and its numpy reference.

Any axis may be resized: `out_shape` gives the output extent of each. An axis of extent n_in
resized to n_out maps output index y to the source coordinate x by the coordinate mode:
    half_pixel           x = (y + 1/2) * n_in / n_out - 1/2
    pytorch_half_pixel   the same, except x = -1/2 when n_out == 1
    asymmetric           x = y * n_in / n_out
    align_corners        x = y * (n_in - 1) / (n_out - 1), x = 0 when n_out == 1
(the scale is n_out / n_in, as ONNX computes it from `sizes`). nearest reads the source index x rounded
by the nearest mode (round_prefer_floor, round_prefer_ceil, floor, ceil); linear weighs the two
neighbours floor(x) and floor(x) + 1 by their distance, per resized axis (n-linear). Indices are
clamped to [0, n_in - 1] (ONNX's edge padding). An axis with n_out == n_in maps y to y in every mode.

The kernel computes x exactly, as a fraction p / q of integers: rounding is integer floor
division (no float rounding decides which pixel is nearest), and a linear weight is the fraction's
remainder over q. The reference computes x in float64, as the ONNX reference does.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import te

MODES = ("nearest", "linear")
COORDS = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel")
NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
MAX_INDEX_PRODUCT = 2 ** 30        # the fraction's numerator 2 * n_out * n_in must fit an int32


def check_resize(shape: Sequence[int], out_shape: Sequence[int], mode: str, coord: str, nearest: str) -> None:
    """Errors name the op and the parameter."""
    for name, value, allowed in (("mode", mode, MODES), ("coord", coord, COORDS), ("nearest", nearest, NEAREST)):
        if value not in allowed:
            raise ValueError(f"resize: parameter {name} must be one of {', '.join(allowed)}, got {value!r}")
    if len(out_shape) != len(shape):
        raise ValueError(f"resize: parameter out_shape must have one extent per axis of shape {tuple(shape)}, "
                         f"got {tuple(out_shape)}")
    if any(2 * i * o >= MAX_INDEX_PRODUCT for i, o in zip(shape, out_shape)):
        raise ValueError(f"resize: extents {tuple(shape)} -> {tuple(out_shape)} too large (2 * in * out must be "
                         f"below 2**30 per axis)")


def source_fraction(y: Any, n_in: int, n_out: int, coord: str) -> tuple[Any, int]:
    """(p, q) with the source coordinate x = p / q of output index y (q > 0)."""
    if coord == "align_corners":
        return (y * (n_in - 1), n_out - 1) if n_out > 1 else (y * 0, 1)
    if coord == "asymmetric":
        return y * n_in, n_out
    if coord == "pytorch_half_pixel" and n_out == 1:
        return y * 0 - 1, 2
    return (2 * y + 1) * n_in - n_out, 2 * n_out


def _clamp(i: Any, n: int, inner: bool = False) -> Any:
    """i clamped to [0, n - 1]. On the innermost axis as selects: loop partition splits the edge
    tiles, where a clamp binds, off the interior, whose source columns are then one scalar plus
    constant lane offsets (a span load and a shuffle in the codegen, not a gather)."""
    if inner:
        return te.if_then_else(i >= 0, te.if_then_else(i < n, i, n - 1), 0)
    return te.minimum(te.maximum(i, 0), n - 1)


def nearest_index(y: Any, n_in: int, n_out: int, coord: str, nearest: str, inner: bool = False) -> Any:
    """The source index of output index y, rounded by `nearest` and clamped: with x = p / q,
    floor(x) = p // q, ceil(x) = (p + q - 1) // q, ceil(x - 1/2) = (2p + q - 1) // 2q and
    floor(x + 1/2) = (2p + q) // 2q."""
    if n_in == n_out:
        return y
    p, q = source_fraction(y, n_in, n_out, coord)
    index = {"floor": lambda: p // q, "ceil": lambda: (p + q - 1) // q,
             "round_prefer_floor": lambda: (2 * p + q - 1) // (2 * q),
             "round_prefer_ceil": lambda: (2 * p + q) // (2 * q)}[nearest]()
    return _clamp(index, n_in, inner)


def _linear_taps(y: Any, n_in: int, n_out: int, coord: str, dtype: str, inner: bool) -> list[tuple[Any, Any]]:
    """[(index, weight)] of output index y: floor(x) and floor(x) + 1, clamped, weighted by
    1 - r and r, r = (p mod q) / q; one tap of weight None on an axis that is not resized."""
    if n_in == n_out:
        return [(y, None)]
    p, q = source_fraction(y, n_in, n_out, coord)
    r = (p % q).astype(dtype) / te.const(float(q), dtype)
    return [(_clamp(p // q, n_in, inner), te.const(1.0, dtype) - r), (_clamp(p // q + 1, n_in, inner), r)]


def resize(x: te.Tensor, out_shape: Sequence[int], mode: str, coord: str, nearest: str, name: str = "resize"
           ) -> te.Tensor:
    """x resized to `out_shape` (module docstring)."""
    check_resize(x.shape, out_shape, mode, coord, nearest)
    if mode == "nearest":
        return te.compute(tuple(out_shape), lambda *y: x[tuple(
            nearest_index(v, i, o, coord, nearest, a == len(y) - 1)
            for a, (v, i, o) in enumerate(zip(y, x.shape, out_shape)))], name=name)

    def value(*y: Any) -> Any:
        taps = [_linear_taps(v, i, o, coord, x.dtype, a == len(y) - 1)
                for a, (v, i, o) in enumerate(zip(y, x.shape, out_shape))]
        total: Any = None
        for corner in np.ndindex(*(len(t) for t in taps)):
            term = x[tuple(taps[a][k][0] for a, k in enumerate(corner))]
            for a, k in enumerate(corner):
                w = taps[a][k][1]
                term = term if w is None else term * w
            total = term if total is None else total + term
        return total

    return te.compute(tuple(out_shape), value, name=name)


# -- numpy reference (float64 coordinates, as ONNX's reference computes them) ---------------------
def _source(y: np.ndarray, n_in: int, n_out: int, coord: str) -> np.ndarray:
    scale = n_out / n_in
    if coord == "align_corners":
        return np.zeros_like(y) if n_out == 1 else y * (n_in - 1) / (n_out - 1)
    if coord == "asymmetric":
        return y / scale
    if coord == "pytorch_half_pixel" and n_out == 1:
        return np.full_like(y, -0.5)
    return (y + 0.5) / scale - 0.5


_ROUND: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "floor": np.floor, "ceil": np.ceil,
    "round_prefer_floor": lambda v: np.ceil(v - 0.5), "round_prefer_ceil": lambda v: np.floor(v + 0.5)}


def _resize_axis(a: np.ndarray, axis: int, n_out: int, mode: str, coord: str, nearest: str) -> np.ndarray:
    n_in = a.shape[axis]
    if n_in == n_out:
        return a
    x = _source(np.arange(n_out, dtype=np.float64), n_in, n_out, coord)
    if mode == "nearest":
        return np.take(a, np.clip(_ROUND[nearest](x), 0, n_in - 1).astype(np.int64), axis=axis)
    x0 = np.floor(x)
    r = (x - x0).reshape([-1 if d == axis else 1 for d in range(a.ndim)])
    lo, hi = (np.take(a, np.clip(i, 0, n_in - 1).astype(np.int64), axis=axis) for i in (x0, x0 + 1))
    return lo * (1 - r) + hi * r


def resize_reference(x: np.ndarray, out_shape: Sequence[int], mode: str, coord: str, nearest: str) -> np.ndarray:
    """numpy resize, one axis at a time (nearest and n-linear both separate by axis)."""
    a = x.astype(np.float64) if mode == "linear" else x
    for axis, n_out in enumerate(out_shape):
        a = _resize_axis(a, axis, n_out, mode, coord, nearest)
    return np.ascontiguousarray(a).astype(x.dtype)
