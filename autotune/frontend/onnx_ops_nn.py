"""ONNX convolutions and pooling -> conv1d / conv2d_grouped / conv_transpose2d / pooling templates.

Padding is resolved at import (static shapes make auto_pad SAME_* explicit numbers). Parameters
are written in their shortest form (stride 1, padding 1, not (1, 1) / (1, 1, 1, 1)) so an
imported layer has the workload key a user tuning that conv by hand gets. A padding the pooling
templates cannot take (asymmetric, or the extra end row of ceil_mode) becomes an explicit pad node
before a pool without padding: -FLT_MAX for max pooling, 0 when average pooling counts the pads.
"""
from __future__ import annotations

import math
from typing import Any

from .builder import Attrs, Builder, converts
from .onnx_ops_shape import MAX_FLOAT32

POOLS = {"MaxPool": "max_pool2d", "AveragePool": "avg_pool2d"}


def compact(values: list[int]) -> int | tuple[int, ...]:
    """(a, a) -> a; (t, l, t, l) -> (t, l); anything else unchanged."""
    if len(set(values)) == 1:
        return int(values[0])
    half = len(values) // 2
    if len(values) == 4 and values[:half] == values[half:]:
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
    problems = [f"auto_pad={attrs['auto_pad']!r}"] if attrs.get("auto_pad", "NOTSET") != "NOTSET" else []
    if "output_shape" in attrs:
        problems.append(f"output_shape={attrs['output_shape']}")
    kernel = attrs.get("kernel_shape")
    if kernel is not None and len(kernel) != 2:
        problems.append(f"kernel_shape={kernel} ({len(kernel)}-d)")
    return problems


@converts("ConvTranspose", check=_conv_transpose_check)
def _conv_transpose(b: Builder, node: Any, attrs: Attrs) -> None:
    """conv_transpose2d (W: C x F/groups x KH x KW), then the bias as for Conv."""
    x, w = node.input[0], node.input[1]
    if len(b.shape(x)) != 4:
        raise b.fail(f"{len(b.shape(x)) - 2}-d ConvTranspose is not supported (2-d only)")
    (N, C, H, W), (_, Fg, KH, KW) = b.shape(x), b.shape(w)
    groups = int(attrs.get("group", 1))
    strides, dilations, begin, end = _geometry(b, attrs, x, [KH, KW])
    params = {"N": N, "C": C, "H": H, "W": W, "F": Fg * groups, "KH": KH, "KW": KW, "stride": compact(strides),
              "padding": compact(begin + end), "output_padding": compact(list(attrs.get("output_padding", [0, 0]))),
              "dilation": compact(dilations), "groups": groups}
    has_bias = len(node.input) > 2 and bool(node.input[2])
    y = b.kernel("conv_transpose2d", [x, w], params, b.out_shape(), out=None if has_bias else b.out())
    if has_bias:
        from .onnx_ops import binary

        binary(b, "add", y, b.view(node.input[2], (1, Fg * groups, 1, 1)), out=b.out())


def _pool_check(node: Any, attrs: Attrs) -> list[str]:
    kernel = attrs.get("kernel_shape", [])
    problems = [f"kernel_shape={kernel} ({len(kernel)}-d)"] if len(kernel) not in (1, 2) else []
    if any(d != 1 for d in attrs.get("dilations", [])):
        problems.append(f"dilations={attrs['dilations']}")
    if attrs.get("storage_order", 0) != 0:
        problems.append(f"storage_order={attrs['storage_order']}")
    if len(node.output) > 1 and node.output[1]:
        problems.append("output 'Indices'")
    return problems


@converts(*POOLS, check=_pool_check)
def _pool(b: Builder, node: Any, attrs: Attrs) -> None:
    """1-d pools run as 2-d ones on an (N, C, 1, L) view; see the module docstring for padding."""
    x = node.input[0]
    kernel = list(attrs["kernel_shape"])
    strides, _, begin, end = _geometry(b, attrs, x, kernel)
    sizes, out_sizes = list(b.shape(x)[2:]), list(b.out_shape()[2:])
    extra = [max((o - 1) * s + k - (i + p + q), 0)
             for o, s, k, i, p, q in zip(out_sizes, strides, kernel, sizes, begin, end)]
    if len(kernel) == 1:
        kernel, strides, begin, end, extra = [1, *kernel], [1, *strides], [0, *begin], [0, *end], [0, *extra]
        x = b.view(x, (*b.shape(x)[:2], 1, sizes[0]))
    end = [e + x_ for e, x_ in zip(end, extra)]
    count_pads = node.op_type == "AveragePool" and attrs.get("count_include_pad", 0)
    fits = begin == end and all(2 * p <= k for p, k in zip(begin, kernel)) and not count_pads
    if node.op_type == "AveragePool" and (any(extra) or (not fits and not count_pads)):
        raise b.fail(f"average pooling with pads {begin}/{end} (ceil_mode or asymmetric pads, "
                     "count_include_pad=0) is not supported")
    if not fits and max(begin + end) > 0:
        fill = -MAX_FLOAT32 if node.op_type == "MaxPool" else 0.0
        padded = tuple(n + p + q for n, p, q in zip(b.shape(x), [0, 0, *begin], [0, 0, *end]))
        x = b.kernel("pad", [x], {"shape": b.shape(x), "pad_before": (0, 0, *begin), "pad_after": (0, 0, *end),
                                  "value": fill}, padded)
        begin = [0] * len(begin)
    params = {"shape": b.shape(x), "kernel": compact(kernel), "stride": compact(strides), "padding": compact(begin)}
    N, C = b.shape(x)[:2]
    rows = [(n + 2 * p - k) // s + 1 for n, p, k, s in zip(b.shape(x)[2:], begin, kernel, strides)]
    b.kernel_out(POOLS[node.op_type], [x], params, (N, C, *rows))


@converts("GlobalAveragePool")
def _global_avg_pool(b: Builder, node: Any, attrs: Attrs) -> None:
    """global_avg_pool on (N, C, H, W); other ranks as an (N, C, spatial, 1) view."""
    x = node.input[0]
    N, C, *spatial = b.shape(x)
    if len(spatial) != 2:
        x = b.view(x, (N, C, math.prod(spatial), 1))
    b.kernel_out("global_avg_pool", [x], {"shape": b.shape(x)}, (N, C, 1, 1))
