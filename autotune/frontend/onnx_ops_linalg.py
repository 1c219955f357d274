"""ONNX products and reductions -> matmul / batch_matmul / reduction / softmax templates.

Gemm's transposes and scales are folded into constant weights at import (a Linear layer costs one
matmul and one add); MatMul of an N-d tensor by a 2-d matrix is one matmul on the rows, a batched
or broadcast MatMul is one batch_matmul on (batch, M, K) views. Row ops (softmax) run on an M x N
view with the reduced axis last, transposed there when it is not.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .builder import Attrs, Builder, allowed, converts
from .onnx_ops import binary

REDUCE = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min"}


def _scaled(b: Builder, x: str, factor: float, step: str) -> str | None:
    """x * factor folded into a constant, or None when x is computed at run time."""
    array = b.const(x)
    if array is None:
        return None
    return b.constant((array * np.asarray(factor, dtype=array.dtype)).astype(array.dtype), step)


def _scale(b: Builder, x: str, factor: float, step: str, out: str | None = None) -> str:
    """x * factor: folded when x is a constant, else a mul node."""
    if factor == 1.0:
        return x
    folded = _scaled(b, x, factor, step)
    if folded is not None:
        return folded
    return binary(b, "mul", x, b.constant(np.asarray([factor], dtype=b.dtype(x)), step), out=out)


@converts("Gemm")
def _gemm(b: Builder, node: Any, attrs: Attrs) -> None:
    """alpha * A' @ B' + beta * C: A' @ B' one matmul (B' transposed to K x N at import), alpha
    folded into a constant operand when there is one, C added (beta folded into it)."""
    a, w = node.input[0], node.input[1]
    c = node.input[2] if len(node.input) > 2 and node.input[2] else None
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    a = b.transpose(a, (1, 0)) if attrs.get("transA", 0) else a
    w = b.transpose(w, (1, 0)) if attrs.get("transB", 0) else w
    if alpha != 1.0:
        folded_w, folded_a = _scaled(b, w, alpha, "scaled_B"), None
        folded_a = None if folded_w is not None else _scaled(b, a, alpha, "scaled_A")
        w, a = folded_w or w, folded_a or a
        alpha = 1.0 if folded_w or folded_a else alpha
    (M, K), N = b.shape(a), b.shape(w)[1]
    plain = c is None or beta == 0.0
    y = b.kernel("matmul", [a, w], {"M": M, "N": N, "K": K}, (M, N), out=b.out() if plain and alpha == 1.0 else None)
    if alpha != 1.0:
        y = _scale(b, y, alpha, "alpha", out=b.out() if plain else None)
    if not plain:
        assert c is not None
        binary(b, "add", y, _scale(b, c, beta, "beta_C"), out=b.out())


def _expand_to(b: Builder, x: str, shape: tuple[int, ...]) -> str:
    if b.shape(x) == shape:
        return x
    array = b.const(x)
    if array is not None:
        return b.constant(np.broadcast_to(array, shape), "broadcast")
    return b.kernel("expand", [x], {"shape": b.shape(x), "out_shape": shape}, shape)


@converts("MatMul")
def _matmul(b: Builder, node: Any, attrs: Attrs) -> None:
    """numpy's matmul: 1-d operands get a unit axis; by a 2-d matrix the rows of every batch go
    through one matmul; otherwise the batch dimensions broadcast into one batch_matmul."""
    a, w = node.input
    if len(b.shape(a)) == 1:
        a = b.view(a, (1, *b.shape(a)))
    if len(b.shape(w)) == 1:
        w = b.view(w, (*b.shape(w), 1))
    sa, sw = b.shape(a), b.shape(w)
    K, N = sw[-2], sw[-1]
    if len(sw) == 2:
        M = math.prod(sa[:-1])
        b.kernel_out("matmul", [b.view(a, (M, K)), w], {"M": M, "N": N, "K": K}, (M, N))
        return
    batch = tuple(np.broadcast_shapes(sa[:-2], sw[:-2]))
    M, B = sa[-2], math.prod(batch)
    a3 = b.view(_expand_to(b, a, (*batch, M, K)), (B, M, K))
    w3 = b.view(_expand_to(b, w, (*batch, K, N)), (B, K, N))
    b.kernel_out("batch_matmul", [a3, w3], {"batch": B, "M": M, "N": N, "K": K}, (B, M, N))


def _axes(b: Builder, node: Any, attrs: Attrs) -> list[int] | None:
    """Reduce axes from the attribute (older opsets) or the second input (newer); None: absent."""
    if "axes" in attrs:
        return list(attrs["axes"])
    if len(node.input) > 1 and node.input[1]:
        return [int(a) for a in b.need_const(node.input[1], "axes").tolist()]
    return None


@converts(*REDUCE)
def _reduce(b: Builder, node: Any, attrs: Attrs) -> None:
    x = node.input[0]
    rank = len(b.shape(x))
    axes = _axes(b, node, attrs)
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            b.view(x, b.out_shape(), b.out())
            return
        axes = list(range(rank))
    keep = int(attrs.get("keepdims", 1)) or int(b.out_shape() == ())   # templates give rank >= 1
    normalized = tuple(sorted(a % rank for a in axes))
    shape = tuple(1 if d in normalized else n for d, n in enumerate(b.shape(x)) if keep or d not in normalized)
    b.kernel_out(REDUCE[node.op_type], [x], {"shape": b.shape(x), "axes": normalized, "keepdims": keep}, shape)


def _argmax_check(node: Any, attrs: Attrs) -> list[str]:
    return allowed(node, attrs, "select_last_index", (0,), 0)


@converts("ArgMax", check=_argmax_check)
def _argmax(b: Builder, node: Any, attrs: Attrs) -> None:
    """argmax gives int32 indices; ONNX wants int64: a cast follows."""
    x = node.input[0]
    shape = b.shape(x)
    axis = int(attrs.get("axis", 0)) % len(shape)
    keep = int(attrs.get("keepdims", 1)) or int(b.out_shape() == ())
    kept = tuple(1 if d == axis else n for d, n in enumerate(shape) if keep or d != axis)
    idx = b.kernel("argmax", [x], {"shape": shape, "axes": (axis,), "keepdims": keep}, kept, "int32")
    b.kernel_out("cast", [idx], {"shape": kept, "to": "int64"}, kept, dtype="int64", kernel_dtype="int32")


@converts("Softmax", "LogSoftmax")
def _softmax(b: Builder, node: Any, attrs: Attrs) -> None:
    """Opset-13 semantics: over one axis; rows of an M x N view with that axis last."""
    x = node.input[0]
    shape = b.shape(x)
    axis = int(attrs.get("axis", -1)) % len(shape)
    perm = [d for d in range(len(shape)) if d != axis] + [axis]
    moved = b.transpose(x, perm)
    N = shape[axis]
    M = math.prod(shape) // N
    op = "softmax" if node.op_type == "Softmax" else "log_softmax"
    if axis == len(shape) - 1:
        b.kernel_out(op, [b.view(moved, (M, N))], {"M": M, "N": N}, (M, N))
        return
    rows = b.kernel(op, [b.view(moved, (M, N))], {"M": M, "N": N}, (M, N))
    back = [perm.index(d) for d in range(len(shape))]
    b.transpose(b.view(rows, b.shape(moved)), back, out=b.out())
