"""ONNX normalizations -> layer_norm / batch_norm / instance_norm templates and reductions.

LayerNormalization over the trailing axes from `axis` is layer_norm on an M x N view; its scale
and bias become (N,) gamma/beta (broadcast at import when given smaller); its optional Mean and
InvStdDev outputs are a row mean and rsqrt(row variance + epsilon) of the same view. BatchNormalization of
any rank runs as batch_norm on an (N, C, spatial, 1) view. GroupNormalization is instance_norm
on an (N, groups, rest) view, then its scale and bias; MeanVarianceNormalization is a mean, a
variance and pointwise steps.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .builder import Attrs, Builder, converts
from .onnx_ops import binary, f32, scalar


def _extra_outputs(node: Any, names: str) -> list[str]:
    return [f"outputs {names}"] if any(node.output[1:]) else []


def _row_vector(b: Builder, x: str | None, shape: tuple[int, ...], fill: float, dtype: str, step: str) -> str:
    """A scale or bias broadcastable to `shape` as an (N,) vector (N = its element count)."""
    n = math.prod(shape)
    if x is None:
        return b.constant(np.full((n,), fill, dtype=dtype), step)
    array = b.const(x)
    if array is not None:
        return b.constant(np.broadcast_to(array, shape).reshape(n), step)
    if math.prod(b.shape(x)) != n:
        raise b.fail(f"a computed {step} of shape {b.shape(x)} must have all of {shape}")
    return b.view(x, (n,))


@converts("LayerNormalization")
def _layer_norm(b: Builder, node: Any, attrs: Attrs) -> None:
    x = node.input[0]
    shape, dtype = b.shape(x), b.dtype(x)
    axis = int(attrs.get("axis", -1)) % len(shape)
    M, N = math.prod(shape[:axis]), math.prod(shape[axis:])
    gamma = _row_vector(b, node.input[1], shape[axis:], 1.0, dtype, "gamma")
    beta = _row_vector(b, node.input[2] if len(node.input) > 2 and node.input[2] else None,
                       shape[axis:], 0.0, dtype, "beta")
    eps = f32(attrs.get("epsilon", 1e-5))
    rows = b.view(x, (M, N))
    b.kernel_out("layer_norm", [rows, gamma, beta], {"M": M, "N": N, "eps": eps}, (M, N))
    stats = {"shape": (M, N), "axes": (1,), "keepdims": 1}
    if len(node.output) > 1 and node.output[1]:
        b.kernel_out("mean", [rows], stats, (M, 1), index=1)
    if len(node.output) > 2 and node.output[2]:
        shifted = binary(b, "add", b.kernel("var", [rows], stats, (M, 1)), scalar(b, eps, dtype, "epsilon"))
        b.kernel_out("rsqrt", [shifted], {"shape": (M, 1)}, (M, 1), index=2)


def _batch_norm_check(node: Any, attrs: Attrs) -> list[str]:
    if attrs.get("training_mode", 0):
        return []
    return _extra_outputs(node, "running_mean/running_var (they are outputs of training_mode=1)")


@converts("BatchNormalization", check=_batch_norm_check)
def _batch_norm(b: Builder, node: Any, attrs: Attrs) -> None:
    """Inference batch norm: ONNX's (X, scale, B, mean, var) are batch_norm's (x, mean, var, gamma,
    beta). training_mode=1 normalises by the batch's own statistics (mean and population variance
    over every axis but the channels) and its optional outputs are the running statistics,
    input * momentum + batch * (1 - momentum)."""
    x, scale, bias, mean, var = node.input
    N, C, *spatial = b.shape(x)
    if len(spatial) != 2:
        x = b.view(x, (N, C, math.prod(spatial), 1))
    H, W = b.shape(x)[2:]
    if attrs.get("training_mode", 0):
        rows = b.view(x, (N, C, H * W))
        stats = {"shape": (N, C, H * W), "axes": (0, 2), "keepdims": 0}
        batch_mean, batch_var = (b.kernel(op, [rows], stats, (C,)) for op in ("mean", "var"))
        momentum = f32(attrs.get("momentum", 0.9))
        for index, (running, batch) in enumerate(((mean, batch_mean), (var, batch_var)), start=1):
            if len(node.output) > index and node.output[index]:
                old = binary(b, "mul", running, scalar(b, momentum, b.dtype(x), "momentum"))
                new = binary(b, "mul", batch, scalar(b, 1 - momentum, b.dtype(x), "one_minus_momentum"))
                binary(b, "add", old, new, out=b.out(index))
        mean, var = batch_mean, batch_var
    params = {"N": N, "C": C, "H": H, "W": W, "eps": f32(attrs.get("epsilon", 1e-5))}
    b.kernel_out("batch_norm", [x, mean, var, scale, bias], params, b.shape(x))


@converts("GroupNormalization")
def _group_norm(b: Builder, node: Any, attrs: Attrs) -> None:
    """Each group of C / G channels normalised over its channels and spatial axes, then scaled
    and shifted per channel (opset 21: scale and bias of C) or per group (18: of G)."""
    x, scale, bias = node.input
    shape, dtype = b.shape(x), b.dtype(x)
    N, C, G = shape[0], shape[1], int(attrs["num_groups"])
    if G < 1 or C % G:
        raise b.fail(f"num_groups={G} does not divide the {C} channels")
    groups = b.view(x, (N, G, math.prod(shape[1:]) // G))
    ones, zeros = (b.constant(np.full(G, v, dtype), step) for v, step in ((1.0, "ones"), (0.0, "zeros")))
    params = {"shape": b.shape(groups), "eps": f32(attrs.get("epsilon", 1e-5))}
    normed = b.kernel("instance_norm", [groups, ones, zeros], params, b.shape(groups))
    per = C if math.prod(b.shape(scale)) == C else G
    rows = b.view(normed, (N, per, math.prod(shape[1:]) // per))
    scaled = binary(b, "mul", rows, b.view(scale, (per, 1)))
    b.view(binary(b, "add", scaled, b.view(bias, (per, 1))), b.out_shape(), b.out())


@converts("MeanVarianceNormalization")
def _mean_variance_norm(b: Builder, node: Any, attrs: Attrs) -> None:
    """(x - mean) / (sqrt(variance) + 1e-9) over `axes` (default 0, 2, 3), as ONNX's function."""
    x = node.input[0]
    shape, dtype = b.shape(x), b.dtype(x)
    axes = tuple(sorted(a % len(shape) for a in attrs.get("axes", [0, 2, 3])))
    stats = {"shape": shape, "axes": axes, "keepdims": 1}
    kept = tuple(1 if d in axes else n for d, n in enumerate(shape))
    mean, var = (b.kernel(op, [x], stats, kept) for op in ("mean", "var"))
    std = b.kernel("sqrt", [var], {"shape": kept}, kept)
    denominator = binary(b, "add", std, scalar(b, 1e-9, dtype, "epsilon"))
    binary(b, "div", binary(b, "sub", x, mean), denominator, out=b.out())


@converts("InstanceNormalization")
def _instance_norm(b: Builder, node: Any, attrs: Attrs) -> None:
    x, scale, bias = node.input
    params = {"shape": b.shape(x), "eps": f32(attrs.get("epsilon", 1e-5))}
    b.kernel_out("instance_norm", [x, scale, bias], params, b.shape(x))
