"""ONNX elementwise ops -> autotune elementwise templates, one small converter per op.

Binary ops broadcast as numpy does, which is ONNX's multidirectional broadcasting, so they map
one to one; variadic Min/Max/Sum/Mean become chains of binary nodes. Float attributes become
float parameters spelled as their float32 value's shortest repr (0.01, not 0.009999999776).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..dtype import is_float
from .builder import Attrs, Builder, allowed, converts

UNARY = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log", "Sqrt": "sqrt",
         "Neg": "neg", "Abs": "abs", "Reciprocal": "reciprocal", "Erf": "erf", "HardSwish": "hard_swish",
         "Not": "logical_not", "Floor": "floor", "Ceil": "ceil", "Round": "round", "Sign": "sign",
         "Softplus": "softplus", "Sin": "sin", "Cos": "cos"}
BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}
COMPARE = {"Equal": "equal", "Less": "less", "Greater": "greater", "LessOrEqual": "less_equal",
           "GreaterOrEqual": "greater_equal"}
VARIADIC = {"Min": "minimum", "Max": "maximum", "Sum": "add", "Mean": "add"}
# op: (template, ((attribute, default), ...)): float attributes become the template's parameters
PARAM_UNARY = {"LeakyRelu": ("leaky_relu", (("alpha", 0.01),)), "Elu": ("elu", (("alpha", 1.0),)),
               "HardSigmoid": ("hard_sigmoid", (("alpha", 0.2), ("beta", 0.5)))}


def f32(value: float) -> float:
    """An ONNX float attribute (a float32) as the float its shortest repr names."""
    return float(str(np.float32(value)))


def unary(b: Builder, op: str, x: str, params: dict[str, Any] | None = None, out: str | None = None,
          dtype: str | None = None) -> str:
    shape = b.shape(x)          # a rank-0 x runs as (1,) and its result is viewed back to rank 0
    x = b.operand(x)
    return b.kernel(op, [x], {"shape": b.shape(x), **(params or {})}, shape, dtype, out)


def binary(b: Builder, op: str, x: str, y: str, out: str | None = None, dtype: str | None = None) -> str:
    """op(x, y) broadcast; the output's shape is numpy's broadcast of the operands' shapes."""
    shape = tuple(np.broadcast_shapes(b.shape(x), b.shape(y)))
    x, y = b.operand(x), b.operand(y)
    return b.kernel(op, [x, y], {"a_shape": b.shape(x), "b_shape": b.shape(y)}, shape, dtype, out)


def like(b: Builder, x: str, dtype: str) -> str:
    """x in `dtype`: a constant converted at import, else a cast node (Pow's exponent, indices)."""
    if b.dtype(x) == dtype:
        return x
    array = b.const(x)
    if array is not None:
        return b.constant(array.astype(dtype), f"as_{dtype}")
    return b.kernel("cast", [x], {"shape": b.shape(x), "to": dtype}, b.shape(x), dtype)


@converts(*UNARY)
def _unary(b: Builder, node: Any, attrs: Attrs) -> None:
    unary(b, UNARY[node.op_type], node.input[0], out=b.out())


def _gelu_check(node: Any, attrs: Attrs) -> list[str]:
    return allowed(node, attrs, "approximate", ("none", "tanh"), "none")


@converts("Gelu", check=_gelu_check)
def _gelu(b: Builder, node: Any, attrs: Attrs) -> None:
    unary(b, "gelu_tanh" if attrs.get("approximate") == "tanh" else "gelu", node.input[0], out=b.out())


@converts(*PARAM_UNARY)
def _param_unary(b: Builder, node: Any, attrs: Attrs) -> None:
    op, defaults = PARAM_UNARY[node.op_type]
    unary(b, op, node.input[0], {name: f32(attrs.get(name, d)) for name, d in defaults}, out=b.out())


@converts(*BINARY)
def _binary(b: Builder, node: Any, attrs: Attrs) -> None:
    x, y = node.input[0], node.input[1]
    binary(b, BINARY[node.op_type], x, like(b, y, b.dtype(x)), out=b.out())


SMALL_POWERS = (1.0, 2.0, 3.0)    # constant exponents computed as products


@converts("Pow")
def _pow(b: Builder, node: Any, attrs: Attrs) -> None:
    """x ** y in x's dtype; an integer x is raised in float64 (exact for every int32 result and for
    int64 ones below 2**53) and cast back, truncating as numpy's astype does. A float x to a
    constant exponent of 1, 2 or 3 (x ** 2 in exported norms, x ** 3 in tanh-GELU) is x, x*x or
    x*x*x, as onnxruntime computes them: "power" is a libm call per element (1000 x 1001 floats
    squared on a Zen 5: 3.6 ms against onnxruntime's 0.13)."""
    x, y = node.input[0], node.input[1]
    exponent = b.const(y)
    if (is_float(b.dtype(x)) and exponent is not None and exponent.size == 1
            and float(exponent.reshape(())) in SMALL_POWERS and b.out_shape() == b.shape(x)):
        _product_power(b, x, int(exponent.reshape(())))
        return
    if is_float(b.dtype(x)):
        binary(b, "power", x, like(b, y, b.dtype(x)), out=b.out())
        return
    raised = binary(b, "power", like(b, x, "float64"), like(b, y, "float64"))
    b.kernel("cast", [raised], {"shape": b.shape(raised), "to": b.dtype(x)}, b.shape(raised), b.dtype(x),
             out=b.out())


def _product_power(b: Builder, x: str, n: int) -> None:
    """x ** n for n in 1..3 as products of x."""
    if n == 1:
        b.view(x, b.out_shape(), b.out())
        return
    acc = x
    for k in range(2, n + 1):
        acc = binary(b, "mul", acc, x, out=b.out() if k == n else None)


@converts(*COMPARE)
def _compare(b: Builder, node: Any, attrs: Attrs) -> None:
    binary(b, COMPARE[node.op_type], node.input[0], node.input[1], out=b.out(), dtype="bool")


@converts(*VARIADIC)
def _variadic(b: Builder, node: Any, attrs: Attrs) -> None:
    """A left fold of binary nodes; Mean divides the sum by the count (a constant)."""
    xs = list(node.input)
    mean = node.op_type == "Mean" and len(xs) > 1
    if len(xs) == 1:
        b.view(xs[0], b.out_shape(), b.out())
        return
    acc = xs[0]
    for k, x in enumerate(xs[1:], start=2):
        last = k == len(xs) and not mean
        acc = binary(b, VARIADIC[node.op_type], acc, x, out=b.out() if last else None)
    if mean:
        binary(b, "mul", acc, scalar(b, 1.0 / len(xs), b.dtype(acc), "inverse_count"), out=b.out())


def where(b: Builder, c: str, x: str, y: str, out: str | None = None) -> str:
    """x where c else y, the three broadcast."""
    shape = tuple(np.broadcast_shapes(b.shape(c), b.shape(x), b.shape(y)))
    c, x, y = b.operand(c), b.operand(x), b.operand(y)
    params = {"cond_shape": b.shape(c), "a_shape": b.shape(x), "b_shape": b.shape(y)}
    return b.kernel("where", [c, x, y], params, shape, b.dtype(x), out, kernel_dtype=b.dtype(x))


def scalar(b: Builder, value: Any, dtype: str, step: str) -> str:
    """A constant of shape (1,): broadcasts against anything."""
    return b.constant(np.asarray([value], dtype=dtype), step)


@converts("Where")
def _where(b: Builder, node: Any, attrs: Attrs) -> None:
    c, x, y = node.input
    where(b, c, x, y, out=b.out())


@converts("And", "Or", "Xor")
def _logic(b: Builder, node: Any, attrs: Attrs) -> None:
    """On bool tensors: a and b = b where a else False; a or b = True where a else b;
    a xor b = not (a == b)."""
    x, y = node.input
    if node.op_type == "Xor":
        same = binary(b, "equal", x, y, dtype="bool")
        unary(b, "logical_not", same, out=b.out())
    elif node.op_type == "And":
        where(b, x, y, scalar(b, False, "bool", "false"), out=b.out())
    else:
        where(b, x, scalar(b, True, "bool", "true"), y, out=b.out())


@converts("Cast", "CastLike")
def _cast(b: Builder, node: Any, attrs: Attrs) -> None:
    to = b.dtype(b.out())
    if to == b.dtype(node.input[0]):
        b.view(node.input[0], b.out_shape(), b.out())
    else:
        unary(b, "cast", node.input[0], {"to": to}, out=b.out(), dtype=to)


def _bound(b: Builder, node: Any, k: int) -> np.ndarray | None:
    return b.const(node.input[k]) if len(node.input) > k and node.input[k] else None


@converts("Clip")
def _clip(b: Builder, node: Any, attrs: Attrs) -> None:
    """clip(lo, hi) for a float tensor with constant bounds (absent: -inf, +inf); otherwise
    maximum then minimum nodes."""
    x = node.input[0]
    given = [len(node.input) > k and bool(node.input[k]) for k in (1, 2)]
    lo, hi = _bound(b, node, 1), _bound(b, node, 2)
    if not any(given):
        b.view(x, b.out_shape(), b.out())
        return
    if b.dtype(x).startswith("float") and (lo is not None or not given[0]) and (hi is not None or not given[1]):
        params = {"lo": -np.inf if lo is None else f32(lo.item()), "hi": np.inf if hi is None else f32(hi.item())}
        unary(b, "clip", x, params, out=b.out())
        return
    if given[0]:
        x = binary(b, "maximum", x, node.input[1], out=None if given[1] else b.out())
    if given[1]:
        binary(b, "minimum", x, node.input[2], out=b.out())
