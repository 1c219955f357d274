"""resize on the CPU (ONNX Resize, nearest and linear): one template on the generic injective
schedule; the compute and its modes are in `autotune.topi.resize`.

Parameters: `shape` (the input), `out_shape` (one extent per axis; any axis may be resized),
`mode` (nearest, linear), `coord` (half_pixel, asymmetric, align_corners, pytorch_half_pixel)
and `nearest` (round_prefer_floor, round_prefer_ceil, floor, ceil; read by mode nearest), with
ONNX's defaults. The scale of an axis is out / in, as ONNX computes it from `sizes`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ... import te
from ...dtype import is_float
from ...topi import resize as topi
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
