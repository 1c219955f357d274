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

from .builder import Attrs, Builder, converts
from .onnx_ops import binary, unary

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


# reductions ONNX defines over sum: (pointwise before, pointwise after); fusion makes them one kernel
COMPOSITE_REDUCE = {"ReduceL1": ("abs", None), "ReduceL2": ("square", "sqrt"), "ReduceSumSquare": ("square", None),
                    "ReduceLogSum": (None, "log"), "ReduceLogSumExp": (None, None)}


def _empty_reduction(op_type: str, dtype: str) -> Any:
    """What ONNX's reductions give over an empty set: 0 for the sums, NaN (the mean of nothing),
    -inf for the log-sums, and for max and min the lowest and highest value of the dtype (-inf and
    inf for floats, False and True)."""
    if op_type in ("ReduceSum", "ReduceL1", "ReduceL2", "ReduceSumSquare"):
        return 0
    if op_type in ("ReduceMean", "ReduceLogSum", "ReduceLogSumExp"):
        return np.nan if op_type == "ReduceMean" else -np.inf
    kind = np.dtype(dtype).kind
    low, high = ((-np.inf, np.inf) if kind == "f" else (False, True) if kind == "b"
                 else (np.iinfo(dtype).min, np.iinfo(dtype).max))
    return low if op_type == "ReduceMax" else high


def _pointwise(b: Builder, op: str | None, x: str) -> str:
    if op is None:
        return x
    return binary(b, "mul", x, x) if op == "square" else unary(b, op, x)


@converts(*REDUCE, *COMPOSITE_REDUCE)
def _reduce(b: Builder, node: Any, attrs: Attrs) -> None:
    """One reduction kernel; the composite ones sum between pointwise steps, and log-sum-exp
    subtracts the max first (exp never overflows)."""
    x = node.input[0]
    rank = len(b.shape(x))
    before, after = COMPOSITE_REDUCE.get(node.op_type, (None, None))
    axes = _axes(b, node, attrs)
    if not axes and attrs.get("noop_with_empty_axes", 0):      # nothing reduced: the pointwise steps only
        b.view(_pointwise(b, after, _pointwise(b, before, x)), b.out_shape(), b.out())
        return
    axes = axes or list(range(rank))
    keep = int(attrs.get("keepdims", 1)) or int(b.out_shape() == ())   # templates give rank >= 1
    normalized = tuple(sorted(a % rank for a in axes))
    shape = tuple(1 if d in normalized else n for d, n in enumerate(b.shape(x)) if keep or d not in normalized)
    if 0 in b.shape(x) and 0 not in shape:      # every output reduces an empty set: ONNX's identity
        identity = _empty_reduction(node.op_type, b.dtype(x))
        b.view(b.constant(np.full(shape, identity, b.dtype(x)), "empty_set"), b.out_shape(), b.out())
        return
    if node.op_type in REDUCE:
        params = {"shape": b.shape(x), "axes": normalized, "keepdims": keep}
        b.kernel_out(REDUCE[node.op_type], [x], params, shape)
        return

    def reduced(op: str, value: str, keepdims: int) -> str:
        out = tuple(1 if d in normalized else n for d, n in enumerate(b.shape(x)) if keepdims or d not in normalized)
        return b.kernel(op, [value], {"shape": b.shape(value), "axes": normalized, "keepdims": keepdims}, out)

    if node.op_type == "ReduceLogSumExp":
        top = reduced("max", x, 1)
        total = reduced("sum", unary(b, "exp", binary(b, "sub", x, top)), keep)
        y = binary(b, "add", unary(b, "log", total), b.view(top, shape))
    else:
        y = _pointwise(b, after, reduced("sum", _pointwise(b, before, x), keep))
    b.view(y, b.out_shape(), b.out())


@converts("ArgMax", "ArgMin")
def _arg_reduce(b: Builder, node: Any, attrs: Attrs) -> None:
    """argmax / argmin give int32 indices; ONNX wants int64: a cast follows. select_last_index=1
    reduces the axis reversed (a slice with step -1) and counts the index back from its end."""
    from .onnx_ops_shape import slice_node

    x = node.input[0]
    shape = b.shape(x)
    axis = int(attrs.get("axis", 0)) % len(shape)
    keep = int(attrs.get("keepdims", 1)) or int(b.out_shape() == ())
    last = int(attrs.get("select_last_index", 0))
    if last and shape[axis] > 1:
        begin = [shape[axis] - 1 if d == axis else 0 for d in range(len(shape))]
        end = [-shape[axis] - 1 if d == axis else n for d, n in enumerate(shape)]
        x = slice_node(b, x, begin, end, [-1 if d == axis else 1 for d in range(len(shape))], None, shape)
    kept = tuple(1 if d == axis else n for d, n in enumerate(shape) if keep or d != axis)
    op = node.op_type.lower()
    idx = b.kernel(op, [x], {"shape": shape, "axes": (axis,), "keepdims": keep}, kept, "int32")
    if not (last and shape[axis] > 1):
        b.kernel_out("cast", [idx], {"shape": kept, "to": "int64"}, kept, dtype="int64", kernel_dtype="int32")
        return
    wide = b.kernel("cast", [idx], {"shape": kept, "to": "int64"}, kept, "int64")
    end_index = b.constant(np.full((1,) * len(kept), shape[axis] - 1, np.int64), f"{op}_last")
    binary(b, "sub", end_index, wide, out=b.out())


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
