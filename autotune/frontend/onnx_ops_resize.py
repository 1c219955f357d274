"""ONNX Resize -> the resize template, or one resample kernel per resized axis.

Nearest and linear at scales that are the output / input size ratio (what `sizes` gives, and
most `scales`) run as one resize kernel with exact integer coordinates. Everything else Resize
can say (cubic, antialias, exclude_outside, half_pixel_symmetric, tf_crop_and_resize with its
roi and extrapolation, scales that are not size ratios) becomes a tap table per resized axis,
computed here in float64 as ONNX's reference computes it (`autotune.topi.resample`), and a
resample kernel per axis: Resize is separable, so the axes apply one after another.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..dtype import is_float
from ..topi import resample as tables
from ..topi.resize import NEAREST
from .builder import Attrs, Builder, allowed, converts
from .onnx_ops import f32

POLICIES = ("stretch", "not_larger", "not_smaller")


def _check(node: Any, attrs: Attrs) -> list[str]:
    mode = attrs.get("mode", "nearest")
    unsupported = (allowed(node, attrs, "mode", tables.MODES, "nearest")
                   + allowed(node, attrs, "coordinate_transformation_mode", tables.COORDS, "half_pixel")
                   + allowed(node, attrs, "nearest_mode", NEAREST, "round_prefer_floor")
                   + allowed(node, attrs, "antialias", (0, 1), 0) + allowed(node, attrs, "exclude_outside", (0, 1), 0)
                   + allowed(node, attrs, "keep_aspect_ratio_policy", POLICIES, "stretch"))
    if mode == "nearest" and attrs.get("antialias", 0):
        unsupported.append("antialias=1 with mode='nearest'")     # ONNX defines it for linear and cubic
    return unsupported


def _input(b: Builder, node: Any, index: int) -> np.ndarray | None:
    """Optional input `index` as a constant (None when absent or empty)."""
    if len(node.input) <= index or not node.input[index]:
        return None
    value = b.need_const(node.input[index], ("roi", "scales", "sizes")[index - 1])
    return value if value.size else None


def _scales_and_roi(b: Builder, node: Any, attrs: Attrs) -> tuple[list[float], list[tuple[float, float]]]:
    """Per axis of the input, the scale ONNX's formulas use and the (start, end) roi."""
    shape, out_shape = b.shape(node.input[0]), b.out_shape()
    rank = len(shape)
    axes = [a % rank for a in attrs.get("axes", range(rank))]
    scales_in, sizes, roi_in = _input(b, node, 2), _input(b, node, 3), _input(b, node, 1)
    scales = [1.0] * rank
    if scales_in is not None:
        for a, s in zip(axes, scales_in.tolist()):
            scales[a] = float(s)
    elif sizes is not None:
        ratios = [n / shape[a] for a, n in zip(axes, sizes.tolist())]
        policy = attrs.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            ratios = [min(ratios) if policy == "not_larger" else max(ratios)] * len(axes)
        for a, s in zip(axes, ratios):
            scales[a] = s
    else:
        scales = [o / i for i, o in zip(shape, out_shape)]
    roi = [(0.0, 1.0)] * rank
    if roi_in is not None:
        for k, a in enumerate(axes):
            roi[a] = (roi_in[k], roi_in[len(axes) + k])     # in the roi's dtype, as ONNX computes with it
    return scales, roi


@converts("Resize", check=_check)
def _resize(b: Builder, node: Any, attrs: Attrs) -> None:
    x = node.input[0]
    shape, out_shape = b.shape(x), b.out_shape()
    mode = attrs.get("mode", "nearest")
    coord = attrs.get("coordinate_transformation_mode", "half_pixel")
    nearest = attrs.get("nearest_mode", "round_prefer_floor")
    scales, roi = _scales_and_roi(b, node, attrs)
    ratio_scales = all(math.isclose(s, o / i, rel_tol=1e-6) for s, i, o in zip(scales, shape, out_shape))
    if ratio_scales and coord == "half_pixel_symmetric":
        coord = "half_pixel"          # the same coordinates when the scale is the size ratio
    if ratio_scales and tables.one_pass(mode, coord, attrs.get("antialias", 0), attrs.get("exclude_outside", 0)):
        params = {"shape": shape, "out_shape": out_shape, "mode": mode, "coord": coord, "nearest": nearest}
        b.kernel_out("resize", [x], params, out_shape)
        return
    if not is_float(b.dtype(x)):
        raise b.fail(f"mode={mode!r} coordinate_transformation_mode={coord!r} at scales {scales} needs a float "
                     f"tensor, got {b.dtype(x)} (an integer tensor resizes with nearest or linear at scales that are "
                     "output / input size ratios)")
    try:
        resized = tables.resize_tables(shape, out_shape, scales, mode, coord, nearest,
                                       float(attrs.get("cubic_coeff_a", -0.75)), bool(attrs.get("exclude_outside", 0)),
                                       bool(attrs.get("antialias", 0)), roi)
    except ValueError as e:
        raise b.fail(str(e)) from None
    current = x
    for k, (a, indices, weights) in enumerate(resized):
        shape_now = b.shape(current)
        params = {"shape": shape_now, "axis": a, "out_extent": out_shape[a], "taps": indices.shape[1],
                  "extrapolate": int(coord == "tf_crop_and_resize"),
                  "fill": f32(attrs.get("extrapolation_value", 0.0))}
        inputs = [current, b.constant(indices, "indices"), b.constant(weights.astype(b.dtype(x)), "weights")]
        step_shape = tuple(out_shape[a] if d == a else n for d, n in enumerate(shape_now))
        current = b.kernel("resample", inputs, params, step_shape, out=b.out() if k == len(resized) - 1 else None)
    if not resized:
        b.view(x, out_shape, b.out())
