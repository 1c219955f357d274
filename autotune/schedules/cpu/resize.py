"""resize and resample on the CPU (ONNX Resize): templates on the generic injective schedule; the
computes and their modes are in `autotune.topi.resize` and `autotune.topi.resample`.

Parameters: `shape` (the input), `out_shape` (one extent per axis; any axis may be resized),
`mode` (nearest, linear), `coord` (half_pixel, asymmetric, align_corners, pytorch_half_pixel)
and `nearest` (round_prefer_floor, round_prefer_ceil, floor, ceil; read by mode nearest), with
ONNX's defaults. The scale of an axis is out / in, as ONNX computes it from `sizes`.

resample (one axis by a tap table: every other Resize) takes `shape`, `axis`, `out_extent`,
`taps` and, for tf_crop_and_resize, `extrapolate` and `fill`; its inputs are x, the int32 indices
and the weights, each table (out_extent, taps).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ... import te
from ...dtype import is_float
from ...topi import resample as resample_topi, resize as topi
from ..generic import injective_schedule
from ..task import template
from .elementwise import as_shape


def _reference(x: np.ndarray, out_shape: Any, mode: str, coord: str, nearest: str, **_: Any) -> np.ndarray:
    return topi.resize_reference(x, as_shape(out_shape, "resize", "out_shape"), mode, coord, nearest)


@template("resize", reference=_reference,
          description="x resized to out_shape (any axes): mode nearest|linear, coord half_pixel|asymmetric|"
                      "align_corners|pytorch_half_pixel, nearest round_prefer_floor|round_prefer_ceil|floor|ceil")
def resize_template(cfg: Any, shape: Any, out_shape: Any, mode: str = "nearest", coord: str = "half_pixel",
                    nearest: str = "round_prefer_floor", dtype: str = "float32"):
    """Default: the generic injective schedule's rule (vector tile of the lanes, threads by size)."""
    if mode == "linear" and not is_float(dtype):
        raise TypeError(f"resize: mode linear needs a float tensor, got {dtype}")
    x = te.placeholder(as_shape(shape, "resize", "shape"), dtype, name="x")
    y = topi.resize(x, as_shape(out_shape, "resize", "out_shape"), mode, coord, nearest)
    return injective_schedule(cfg, y), [x, y]


def _resample_reference(x: np.ndarray, indices: np.ndarray, weights: np.ndarray, axis: int, extrapolate: int = 0,
                        fill: float = 0.0, **_: Any) -> np.ndarray:
    return resample_topi.resample_reference(x, indices, weights, axis, bool(extrapolate), fill)


@template("resample", reference=_resample_reference,
          description="x resampled along one axis: out[.., o, ..] = sum_t weights[o, t] * x[.., indices[o, t], ..] "
                      "(ONNX Resize cubic, antialias, non-ratio scales, tf_crop_and_resize)")
def resample_template(cfg: Any, shape: Any, axis: int, out_extent: int, taps: int, extrapolate: int = 0,
                      fill: float = 0.0, dtype: str = "float32"):
    """Default: the generic injective schedule's rule (vector tile of the lanes, threads by size)."""
    if not is_float(dtype):
        raise TypeError(f"resample: x must be a float tensor, got {dtype}")
    x = te.placeholder(as_shape(shape, "resample", "shape"), dtype, name="x")
    if not 0 <= axis < len(x.shape):
        raise ValueError(f"resample: parameter axis must be in [0, {len(x.shape)}), got {axis}")
    for name, value in (("out_extent", out_extent), ("taps", taps)):
        if value < 1:
            raise ValueError(f"resample: parameter {name} must be positive, got {value}")
    if taps > resample_topi.MAX_TAPS:
        raise ValueError(f"resample: parameter taps must be at most {resample_topi.MAX_TAPS}, got {taps}")
    indices = te.placeholder((out_extent, taps), "int32", name="indices")
    weights = te.placeholder((out_extent, taps), dtype, name="weights")
    y = resample_topi.resample(x, indices, weights, axis, bool(extrapolate), fill)
    return injective_schedule(cfg, y), [x, indices, weights, y]
