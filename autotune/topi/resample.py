"""Resampling along one axis by a tap table, and the tables of ONNX Resize's every mode.

`resample` is the general form of a separable resize: along `axis`, output index o reads `taps`
input indices `indices[o, t]` and sums them weighted by `weights[o, t]`. Every ONNX Resize mode
(nearest, linear, cubic), with antialias, exclude_outside, any coordinate mode and scales that
are not size ratios, is such a table per axis, built at import by `resize_table` in float64 as
ONNX's reference computes it; a model applies one resample per resized axis. (The `resize`
template covers nearest and linear at size-ratio scales in one pass, with exact integer
coordinates; this is the rest.)

An index outside the axis is clamped (a table read from anywhere can never read outside x).
tf_crop_and_resize maps some outputs outside the input: their row holds -1 in every tap, and with
`extrapolate` set the output there is `fill`.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import te
from .resize import COORDS as EXACT_COORDS

MODES = ("nearest", "linear", "cubic")
COORDS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
          "tf_crop_and_resize")
MAX_TAPS = 64       # a downscale with antialias reads ~4/scale taps (cubic): 64 is 16x down, cubic


def resample(x: te.Tensor, indices: te.Tensor, weights: te.Tensor, axis: int, extrapolate: bool = False,
             fill: float = 0.0) -> te.Tensor:
    """out[..., o, ...] = sum_t weights[o, t] * x[..., indices[o, t], ...] (module docstring)."""
    n_out, taps = indices.shape
    n_in = x.shape[axis]
    shape = tuple(n_out if d == axis else n for d, n in enumerate(x.shape))

    def value(*o: Any) -> Any:
        total: Any = None
        for t in range(taps):
            i = te.minimum(te.maximum(indices[o[axis], t], 0), n_in - 1)
            term = weights[o[axis], t] * x[o[:axis] + (i,) + o[axis + 1:]]
            total = term if total is None else total + term
        if extrapolate:
            return te.if_then_else(indices[o[axis], 0] < 0, te.const(fill, x.dtype), total)
        return total

    return te.compute(shape, value, name="resample")


def resample_reference(x: np.ndarray, indices: np.ndarray, weights: np.ndarray, axis: int,
                       extrapolate: bool = False, fill: float = 0.0) -> np.ndarray:
    """numpy resample, summed in float64."""
    gathered = np.take(x.astype(np.float64), np.clip(indices, 0, x.shape[axis] - 1), axis=axis)
    w = weights.astype(np.float64).reshape((1,) * axis + weights.shape + (1,) * (x.ndim - axis - 1))
    out = (gathered * w).sum(axis=axis + 1)
    if extrapolate:
        outside = (indices[:, 0] < 0).reshape((1,) * axis + (-1,) + (1,) * (x.ndim - axis - 1))
        out = np.where(outside, fill, out)
    return out.astype(x.dtype)


# -- ONNX Resize as tap tables ------------------------------------------------------------------
def source_coordinates(n_in: int, n_out: int, scale: float, coord: str, roi: tuple[float, float]
                       ) -> np.ndarray:
    """The source coordinate of each output index (float64), as ONNX Resize defines it; the
    "output width" of the formulas is scale * n_in, which differs from n_out when the scale is
    not a size ratio."""
    y = np.arange(n_out, dtype=np.float64)
    width = scale * n_in
    if coord == "align_corners":
        return np.zeros(n_out) if width == 1 else y * (n_in - 1) / (width - 1)
    if coord == "asymmetric":
        return y / scale
    if coord == "tf_crop_and_resize":
        start, end = roi
        # in ONNX's order of operations and the roi's own dtype: at the input's edge a rounding
        # decides extrapolation
        if width == 1:
            x = np.full(n_out, (end - start) * (n_in - 1) / 2)
        else:
            x = y * (end - start) * (n_in - 1) / (width - 1)
        return x + start * (n_in - 1)
    if coord == "pytorch_half_pixel" and width == 1:
        return np.full(n_out, -0.5)
    offset = n_in / 2 * (1 - n_out / width) if coord == "half_pixel_symmetric" else 0.0
    return offset + (y + 0.5) / scale - 0.5


def _cubic(d: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with parameter a at distances d."""
    d = np.abs(d)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, np.where(d < 2, far, 0.0))


def _coefficients(mode: str, nearest: str, cubic_a: float, antialias: bool, scale: float
                  ) -> tuple[int, Callable[[np.ndarray], np.ndarray]]:
    """(n, f): f maps the fractions r in (0, 1] (distance from the left neighbour floor, a whole
    coordinate counting as r = 1 from the pixel before it) to the (len(r), n) weights of the n
    neighbours left - n/2 + 1 ... left + n/2; n is even in every mode."""
    if mode == "nearest":
        pick_right = {"round_prefer_floor": lambda r: r > 0.5, "round_prefer_ceil": lambda r: r >= 0.5,
                      "floor": lambda r: r == 1, "ceil": lambda r: r > 0}[nearest]
        return 2, lambda r: np.stack([~pick_right(r), pick_right(r)], axis=1).astype(np.float64)
    if not antialias or scale >= 1:
        if mode == "linear":
            return 2, lambda r: np.stack([1 - r, r], axis=1)
        return 4, lambda r: _cubic(np.stack([r + 1, r, 1 - r, 2 - r], axis=1), cubic_a)
    # antialias while downscaling: the kernel stretched by 1/scale, weights normalised to sum 1
    support = 1 if mode == "linear" else 2
    first = math.floor(-support / scale) + 1
    offsets = np.arange(first, 1 - first + 1, dtype=np.float64)

    def stretched(r: np.ndarray) -> np.ndarray:
        d = (offsets[None, :] - r[:, None]) * scale
        w = np.clip(1 - np.abs(d), 0, 1) if mode == "linear" else _cubic(d, cubic_a)
        return w / w.sum(axis=1, keepdims=True)

    return len(offsets), stretched


def resize_table(n_in: int, n_out: int, scale: float, mode: str = "nearest", coord: str = "half_pixel",
                 nearest: str = "round_prefer_floor", cubic_a: float = -0.75, exclude_outside: bool = False,
                 antialias: bool = False, roi: tuple[float, float] = (0.0, 1.0)
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(indices int32, weights float64), each (n_out, taps): ONNX Resize of one axis of extent
    n_in to n_out at `scale` (edge pixels repeat past the border; exclude_outside instead drops
    the taps outside and renormalises). tf_crop_and_resize outputs outside the input get -1
    indices and zero weights (module docstring)."""
    x = source_coordinates(n_in, n_out, scale, coord, roi)
    left = np.floor(x)
    whole = x == left
    r = np.where(whole, 1.0, x - left)
    left = np.where(whole, left - 1, left).astype(np.int64)
    n, coefficients = _coefficients(mode, nearest, cubic_a, antialias, scale)
    if n > MAX_TAPS:
        raise ValueError(f"a {mode} antialiased downscale by {1 / scale:.3g}x reads {n} taps per output, "
                         f"more than {MAX_TAPS}")
    weights = coefficients(r)
    indices = left[:, None] + np.arange(1 - n // 2, n // 2 + 1)[None, :]
    if exclude_outside:
        weights = np.where((indices < 0) | (indices >= n_in), 0.0, weights)
        total = weights.sum(axis=1, keepdims=True)
        weights = weights / np.where(total == 0, 1.0, total)
    indices = np.clip(indices, 0, n_in - 1)
    if coord == "tf_crop_and_resize":
        outside = (x < 0) | (x > n_in - 1)
        indices[outside], weights[outside] = -1, 0.0
    return indices.astype(np.int32), weights


def one_pass(mode: str, coord: str, antialias: bool, exclude_outside: bool) -> bool:
    """Whether the `resize` template (one kernel, exact integer coordinates) computes this Resize
    at size-ratio scales; otherwise it takes tap tables and a resample per axis."""
    return (mode != "cubic" and coord in EXACT_COORDS and not antialias
            and not (mode == "nearest" and exclude_outside))


def _is_identity(n_in: int, n_out: int, scale: float, coord: str, roi: tuple[float, float]) -> bool:
    """Whether ONNX Resize leaves an axis as it is (its reference skips such an axis)."""
    kept_roi = coord != "tf_crop_and_resize" or (math.isclose(roi[0], 0.0) and math.isclose(roi[1], 1.0))
    return n_in == n_out and math.isclose(scale, 1.0) and kept_roi


def resize_tables(shape: Sequence[int], out_shape: Sequence[int], scales: Sequence[float], mode: str, coord: str,
                  nearest: str = "round_prefer_floor", cubic_a: float = -0.75, exclude_outside: bool = False,
                  antialias: bool = False, rois: Sequence[tuple[float, float]] | None = None
                  ) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """[(axis, indices, weights)] of the axes ONNX Resize changes, in axis order: one resample each."""
    rois = rois or [(0.0, 1.0)] * len(shape)
    return [(a, *resize_table(n_in, n_out, scale, mode, coord, nearest, cubic_a, exclude_outside, antialias, roi))
            for a, (n_in, n_out, scale, roi) in enumerate(zip(shape, out_shape, scales, rois))
            if not _is_identity(n_in, n_out, scale, coord, roi)]

