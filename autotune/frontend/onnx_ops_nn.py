"""ONNX convolutions and pooling -> conv1d / conv2d_grouped / conv_transpose2d/3d / pooling templates.

Padding is resolved at import (static shapes make auto_pad SAME_* explicit numbers). Parameters
are written in their shortest form (stride 1, padding 1, not (1, 1) / (1, 1, 1, 1)) so an
imported layer has the workload key a user tuning that conv by hand gets. A pool the pooling
templates cannot take (asymmetric padding, ceil_mode's extra end row, dilation, 3-d and more,
count_include_pad) becomes an explicit pad node and pools along one axis at a time, an average
then scaled by a constant to ONNX's divisor (`_padded_pool`).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .builder import Attrs, Builder, converts
from .onnx_ops_shape import MAX_FLOAT32

POOLS = {"MaxPool": "max_pool2d", "AveragePool": "avg_pool2d"}


def compact(values: list[int]) -> int | tuple[int, ...]:
    """(a, a) -> a; (t, l, t, l) -> (t, l) (3-d pads alike); anything else unchanged."""
    if len(set(values)) == 1:
        return int(values[0])
    half = len(values) // 2
    if len(values) in (4, 6) and values[:half] == values[half:]:
        return tuple(values[:half])
    return tuple(int(v) for v in values)


def pads(attrs: Attrs, sizes: tuple[int, ...], kernel: list[int], strides: list[int],
         dilations: list[int]) -> tuple[list[int], list[int]]:
    """(begin, end) padding per spatial axis, auto_pad resolved on the static sizes."""
    n = len(sizes)
    mode = attrs.get("auto_pad", "NOTSET")
    if mode == "NOTSET":
        given = list(attrs.get("pads", [0] * 2 * n))
        return given[:n], given[n:]
    if mode == "VALID":
        return [0] * n, [0] * n
    total = [max((math.ceil(i / s) - 1) * s + (k - 1) * d + 1 - i, 0)
             for i, s, k, d in zip(sizes, strides, kernel, dilations)]
    small = [t // 2 for t in total]
    big = [t - t // 2 for t in total]
    return (small, big) if mode == "SAME_UPPER" else (big, small)


def _geometry(b: Builder, attrs: Attrs, x: str, kernel: list[int]) -> tuple[list[int], list[int], list[int], list[int]]:
    n = len(kernel)
    strides = list(attrs.get("strides", [1] * n))
    dilations = list(attrs.get("dilations", [1] * n))
    begin, end = pads(attrs, b.shape(x)[2:], kernel, strides, dilations)
    return strides, dilations, begin, end


def _conv_check(node: Any, attrs: Attrs) -> list[str]:
    kernel = attrs.get("kernel_shape")
    return [f"kernel_shape={kernel} ({len(kernel)}-d)"] if kernel is not None and len(kernel) not in (1, 2) else []


@converts("Conv", check=_conv_check)
def _conv(b: Builder, node: Any, attrs: Attrs) -> None:
    """conv1d or conv2d_grouped, then the bias added as a (1, F, 1, 1) constant."""
    x, w = node.input[0], node.input[1]
    (N, C, *sizes), (F, _, *kernel) = b.shape(x), b.shape(w)
    if len(kernel) not in (1, 2):
        raise b.fail(f"{len(kernel)}-d convolution is not supported")
    strides, dilations, begin, end = _geometry(b, attrs, x, kernel)
    common = {"stride": compact(strides), "padding": compact(begin + end), "dilation": compact(dilations),
              "groups": int(attrs.get("group", 1))}
    if len(kernel) == 1:
        op, params = "conv1d", {"N": N, "C": C, "L": sizes[0], "F": F, "K": kernel[0], **common}
    else:
        op, params = "conv2d_grouped", {"N": N, "C": C, "H": sizes[0], "W": sizes[1], "F": F,
                                        "KH": kernel[0], "KW": kernel[1], **common}
    has_bias = len(node.input) > 2 and bool(node.input[2])
    y = b.kernel(op, [x, w], params, b.out_shape(), out=None if has_bias else b.out())
    if has_bias:
        from .onnx_ops import binary

        bias = b.view(node.input[2], (1, F) + (1,) * len(kernel))
        binary(b, "add", y, bias, out=b.out())


def _conv_transpose_check(node: Any, attrs: Attrs) -> list[str]:
    kernel = attrs.get("kernel_shape")
    return [f"kernel_shape={kernel} ({len(kernel)}-d)"] if kernel is not None and len(kernel) not in (1, 2, 3) else []


def _transpose_pads(attrs: Attrs, sizes: tuple[int, ...], kernel: list[int], strides: list[int],
                    dilations: list[int]) -> tuple[list[int], list[int], list[int]]:
    """(begin, end, output_padding) of a ConvTranspose by ONNX's (and onnxruntime's) rule: the given
    pads, or the total padding that makes `output_shape` (SAME_*: input size x stride), split evenly
    with the odd one at the end for SAME_UPPER, at the start otherwise. A negative total pads nothing
    and adds the missing rows at the end, as output_padding does."""
    n = len(sizes)
    mode = attrs.get("auto_pad", "NOTSET")
    output_padding = list(attrs.get("output_padding", [0] * n))
    if "output_shape" not in attrs and mode in ("NOTSET", "VALID"):
        given = list(attrs.get("pads", [0] * 2 * n)) if mode == "NOTSET" else [0] * 2 * n
        return given[:n], given[n:], output_padding
    want = list(attrs["output_shape"])[-n:] if "output_shape" in attrs else [i * s for i, s in zip(sizes, strides)]
    total = [s * (i - 1) + p + (k - 1) * d + 1 - o
             for i, s, k, d, p, o in zip(sizes, strides, kernel, dilations, output_padding, want)]
    small, big = [max(t, 0) // 2 for t in total], [max(t, 0) - max(t, 0) // 2 for t in total]
    output_padding = [p + max(-t, 0) for p, t in zip(output_padding, total)]
    return (small, big, output_padding) if mode == "SAME_UPPER" else (big, small, output_padding)


@converts("ConvTranspose", check=_conv_transpose_check)
def _conv_transpose(b: Builder, node: Any, attrs: Attrs) -> None:
    """conv_transpose2d (W: C x F/groups x KH x KW) or conv_transpose3d, then the bias as for
    Conv; 1-d runs as 2-d on (N, C, 1, L) and (C, F/groups, 1, K) views."""
    x, w = node.input[0], node.input[1]
    rank = len(b.shape(x))
    if rank not in (3, 4, 5):
        raise b.fail(f"{rank - 2}-d ConvTranspose is not supported (1-d, 2-d and 3-d only)")
    (N, C, *sizes), (_, Fg, *kernel) = b.shape(x), b.shape(w)
    groups = int(attrs.get("group", 1))
    strides, dilations = list(attrs.get("strides", [1] * len(sizes))), list(attrs.get("dilations", [1] * len(sizes)))
    begin, end, output_padding = _transpose_pads(attrs, tuple(sizes), kernel, strides, dilations)
    if rank == 3:
        x, w = b.view(x, (N, C, 1, sizes[0])), b.view(w, (C, Fg, 1, kernel[0]))
        sizes, kernel, begin, end = [1, *sizes], [1, *kernel], [0, *begin], [0, *end]
        strides, dilations, output_padding = [1, *strides], [1, *dilations], [0, *output_padding]
    out_shape = b.out_shape() if rank > 3 else (N, Fg * groups, 1, b.out_shape()[2])
    axes = ("D", "H", "W") if rank == 5 else ("H", "W")
    params = {"N": N, "C": C, **dict(zip(axes, sizes)), "F": Fg * groups, **{f"K{a}": k for a, k in zip(axes, kernel)},
              "stride": compact(strides), "padding": compact(begin + end), "output_padding": compact(output_padding),
              "dilation": compact(dilations), "groups": groups}
    has_bias = len(node.input) > 2 and bool(node.input[2])
    last = b.out() if rank > 3 else None           # a 1-d result is viewed back from (N, F, 1, L)
    op = "conv_transpose3d" if rank == 5 else "conv_transpose2d"
    y = b.kernel(op, [x, w], params, out_shape, out=None if has_bias else last)
    if has_bias:
        from .onnx_ops import binary

        y = binary(b, "add", y, b.view(node.input[2], (1, Fg * groups) + (1,) * (len(out_shape) - 2)), out=last)
    if rank == 3:
        b.view(y, b.out_shape(), b.out())


def _wants_indices(node: Any) -> bool:
    return len(node.output) > 1 and bool(node.output[1])


def _pool_check(node: Any, attrs: Attrs) -> list[str]:
    rank = len(attrs.get("kernel_shape", ()))
    return [f"output 'Indices' of a {rank}-d MaxPool (1-d and 2-d only)"] if _wants_indices(node) and rank > 2 else []


@converts(*POOLS, check=_pool_check)
def _pool(b: Builder, node: Any, attrs: Attrs) -> None:
    """A 1-d or 2-d pool the templates take (symmetric padding of at most half the window, no
    dilation, average over the valid elements only) is one kernel; 1-d runs as 2-d on an
    (N, C, 1, L) view. A window over the whole unpadded input is the global pool (ResNet's
    7x7 AveragePool: the pool template ran it at 0.73-0.87x onnxruntime). Any other pool is
    `_padded_pool`."""
    x = node.input[0]
    kernel = list(attrs["kernel_shape"])
    strides, dilations, begin, end = _geometry(b, attrs, x, kernel)
    sizes, out_sizes = list(b.shape(x)[2:]), list(b.out_shape()[2:])
    if kernel == sizes and not any(begin) and not any(end) and set(dilations) == {1} and not _wants_indices(node):
        (_global_max_pool if node.op_type == "MaxPool" else _global_avg_pool)(b, node, attrs)
        return
    reach = [max((o - 1) * s + (k - 1) * d + 1 - i - p, q)   # ceil_mode's last window may pass the padding
             for o, s, k, d, i, p, q in zip(out_sizes, strides, kernel, dilations, sizes, begin, end)]
    count_pads = node.op_type == "AveragePool" and bool(attrs.get("count_include_pad", 0))
    fits = (len(kernel) in (1, 2) and set(dilations) == {1} and begin == reach
            and all(2 * p <= k for p, k in zip(begin, kernel)) and not (count_pads and max(begin) > 0))
    geometry = (kernel, strides, dilations, begin)          # the indices' (before a 1-d pool's lift below)
    if not fits:
        _padded_pool(b, node, attrs, kernel, strides, dilations, begin, end, reach)
    else:
        if len(kernel) == 1:
            kernel, strides, begin = [1, *kernel], [1, *strides], [0, *begin]
            x = b.view(x, (*b.shape(x)[:2], 1, sizes[0]))
        op, params, shape = _pool2d(node.op_type == "MaxPool", b.shape(x), kernel, strides, begin)
        b.kernel_out(op, [x], params, shape)
    if _wants_indices(node):
        _pool_indices(b, node, attrs, *geometry)


def _pool_indices(b: Builder, node: Any, attrs: Attrs, kernel: list[int], strides: list[int],
                  dilations: list[int], begin: list[int]) -> None:
    """MaxPool's second output: where in x (flattened) each window's max came from, by the
    `max_pool2d_indices` kernel reading x and the pooled values; a 1-d pool as 2-d on (N, C, 1, L)."""
    x, y = node.input[0], b.out()
    if len(kernel) == 1:
        kernel, strides, dilations, begin = [1, *kernel], [1, *strides], [1, *dilations], [0, *begin]
        x, y = (b.view(v, (*b.shape(v)[:2], 1, b.shape(v)[2])) for v in (x, y))
    params = {"shape": b.shape(x), "out": b.shape(y)[2:], "kernel": compact(kernel), "stride": compact(strides),
              "padding": compact(begin), "dilation": compact(dilations),
              "column_major": int(attrs.get("storage_order", 0) == 1)}
    b.kernel_out("max_pool2d_indices", [x, y], params, b.shape(y), index=1, dtype="int64")


def _pool2d(is_max: bool, shape: tuple[int, ...], kernel: list[int], strides: list[int],
            padding: list[int]) -> tuple[str, dict[str, Any], tuple[int, ...]]:
    """(template, parameters in their shortest form, output shape) of one max_pool2d / avg_pool2d
    kernel over an (N, C, H, W) value of `shape`, `padding` on both sides of each axis."""
    rows = [(n + 2 * p - k) // s + 1 for n, p, k, s in zip(shape[2:], padding, kernel, strides)]
    params = {"shape": shape, "kernel": compact(kernel), "stride": compact(strides), "padding": compact(padding)}
    return "max_pool2d" if is_max else "avg_pool2d", params, (*shape[:2], *rows)


def _padded_pool(b: Builder, node: Any, attrs: Attrs, kernel: list[int], strides: list[int], dilations: list[int],
                 begin: list[int], end: list[int], reach: list[int]) -> None:
    """Any pool, as ONNX defines it: the input padded explicitly (-FLT_MAX for max pooling, 0 for
    average pooling) by `begin` and `reach` (`end`, or more where ceil_mode's last window passes
    it), then pooled by one 2-d pool kernel, or, dilated or of another rank, one spatial axis at a
    time (a box window is separable), and an
    average scaled by a constant from window size to the count ONNX divides by: the window's
    elements inside the input, or inside input and pads with count_include_pad (never the
    rows ceil_mode adds)."""
    from .onnx_ops import binary

    x = node.input[0]
    is_max = node.op_type == "MaxPool"
    sizes = b.shape(x)[2:]
    if max(begin + reach) > 0:
        padded = tuple(n + p + q for n, p, q in zip(b.shape(x), [0, 0, *begin], [0, 0, *reach]))
        x = b.kernel("pad", [x], {"shape": b.shape(x), "pad_before": (0, 0, *begin), "pad_after": (0, 0, *reach),
                                  "value": -MAX_FLOAT32 if is_max else 0.0}, padded)
    if len(kernel) == 2 and set(dilations) == {1}:       # one 2-d pool kernel over the padded input
        op, params, shape = _pool2d(is_max, b.shape(x), kernel, strides, [0, 0])
        x = b.kernel(op, [x], params, shape, out=b.out() if is_max else None)
        if is_max:
            return
        divided = float(math.prod(kernel))
    else:
        divided = 1.0
        for axis, (k, s, d) in enumerate(zip(kernel, strides, dilations)):
            if k > 1 or s > 1:
                x, divisor = _pool_axis(b, x, 2 + axis, k, s, d, is_max)
                divided *= divisor
    if is_max:
        b.view(x, b.out_shape(), b.out())
        return
    include = bool(attrs.get("count_include_pad", 0))
    counts = [_window_counts(o, k, s, d, p, n, q if include else 0, p if include else 0)
              for o, k, s, d, p, n, q in zip(b.out_shape()[2:], kernel, strides, dilations, begin, sizes, end)]
    count = counts[0]
    for c in counts[1:]:
        count = np.multiply.outer(count, c)
    if np.all(count == divided):
        b.view(x, b.out_shape(), b.out())
        return
    with np.errstate(divide="ignore"):      # a window wholly in the padding averages nothing: NaN, as ONNX
        scale = (divided / count).astype(np.float32)
    binary(b, "mul", x, b.constant(scale.reshape((1, 1, *scale.shape)), "pool_scale"), out=b.out())


def _window_counts(out: int, k: int, s: int, d: int, begin: int, n: int, end: int, start: int) -> np.ndarray:
    """Per output position along one axis, how many of its window's positions (padded coordinates
    o*s + j*d) fall in [begin - start, begin + n + end)."""
    pos = np.arange(out)[:, None] * s + np.arange(k)[None, :] * d
    return ((pos >= begin - start) & (pos < begin + n + end)).sum(axis=1).astype(np.float64)


def _pool_axis(b: Builder, x: str, axis: int, k: int, s: int, d: int, is_max: bool) -> tuple[str, int]:
    """x pooled along one axis without padding: (the result, what an average divided by). Without
    dilation a 2-d pool kernel of window (k, 1) on a view with that axis as the rows; with it, the
    max (or sum) of k strided slices, which the fusion pass makes one pointwise kernel."""
    from .onnx_ops import binary
    from .onnx_ops_shape import slice_node

    shape = b.shape(x)
    n, out = shape[axis], (shape[axis] - (k - 1) * d - 1) // s + 1
    out_shape = (*shape[:axis], out, *shape[axis + 1:])
    if d == 1:
        rows = (math.prod(shape[:axis]), 1, n, math.prod(shape[axis + 1:]))
        op, params, shape = _pool2d(is_max, rows, [k, 1], [s, 1], [0, 0])
        return b.view(b.kernel(op, [b.view(x, rows)], params, shape), out_shape), k
    acc = None
    for j in range(k):
        begin = [j * d if a == axis else 0 for a in range(len(shape))]
        end = [j * d + (out - 1) * s + 1 if a == axis else m for a, m in enumerate(shape)]
        part = slice_node(b, x, begin, end, [s if a == axis else 1 for a in range(len(shape))], None, out_shape)
        acc = part if acc is None else binary(b, "maximum" if is_max else "add", acc, part)
    assert acc is not None
    return acc, 1


@converts("GlobalMaxPool")
def _global_max_pool(b: Builder, node: Any, attrs: Attrs) -> None:
    """max over every spatial axis, kept as 1s."""
    x = node.input[0]
    shape = b.shape(x)
    params = {"shape": shape, "axes": tuple(range(2, len(shape))), "keepdims": 1}
    b.kernel_out("max", [x], params, b.out_shape())


@converts("GlobalAveragePool")
def _global_avg_pool(b: Builder, node: Any, attrs: Attrs) -> None:
    """global_avg_pool on (N, C, H, W); other ranks as an (N, C, spatial, 1) view."""
    x = node.input[0]
    N, C, *spatial = b.shape(x)
    if len(spatial) != 2:
        x = b.view(x, (N, C, math.prod(spatial), 1))
    b.kernel_out("global_avg_pool", [x], {"shape": b.shape(x)}, (N, C, 1, 1))
