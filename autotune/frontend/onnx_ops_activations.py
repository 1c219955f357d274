"""ONNX activations that are short compositions of elementwise templates: PRelu, Softsign,
Selu, Celu, ThresholdedRelu, Shrink and Mish.

Each becomes a few broadcast nodes, which the graph's fusion turns back into one kernel (a
pointwise chain), so a composition costs what a dedicated template would. Float attributes are
spelled as their float32 value's shortest repr, as everywhere in the frontend.
"""
from __future__ import annotations

from typing import Any

from ..dtype import is_float
from .builder import Attrs, Builder, converts
from .onnx_ops import binary, f32, like, scalar, unary, where


def _float_input(b: Builder, x: str) -> None:
    if not is_float(b.dtype(x)):
        raise b.fail(f"input {x!r} is {b.dtype(x)}: this converter takes float tensors")


@converts("PRelu")
def _prelu(b: Builder, node: Any, attrs: Attrs) -> None:
    """x * (slope where x < 0 else 1): one chain from the comparison, which fusion makes one kernel
    (slope * x where x < 0 else x would be two branches from x)."""
    x, slope = node.input
    negative = binary(b, "less", x, scalar(b, 0, b.dtype(x), "zero"), dtype="bool")
    factor = where(b, negative, like(b, slope, b.dtype(x)), scalar(b, 1, b.dtype(x), "one"))
    binary(b, "mul", x, factor, out=b.out())


@converts("Softsign")
def _softsign(b: Builder, node: Any, attrs: Attrs) -> None:
    """x / (1 + |x|)."""
    x = node.input[0]
    _float_input(b, x)
    one_plus = binary(b, "add", unary(b, "abs", x), scalar(b, 1.0, b.dtype(x), "one"))
    binary(b, "div", x, one_plus, out=b.out())


@converts("Selu")
def _selu(b: Builder, node: Any, attrs: Attrs) -> None:
    """gamma * elu(x, alpha)."""
    x = node.input[0]
    _float_input(b, x)
    alpha = f32(attrs.get("alpha", 1.67326319217681884765625))
    gamma = f32(attrs.get("gamma", 1.05070102214813232421875))
    elu = unary(b, "elu", x, {"alpha": alpha})
    binary(b, "mul", elu, scalar(b, gamma, b.dtype(x), "gamma"), out=b.out())


@converts("Celu")
def _celu(b: Builder, node: Any, attrs: Attrs) -> None:
    """alpha * elu(x / alpha, 1) = max(0, x) + min(0, alpha * (exp(x / alpha) - 1))."""
    x = node.input[0]
    _float_input(b, x)
    alpha = f32(attrs.get("alpha", 1.0))
    scaled = binary(b, "div", x, scalar(b, alpha, b.dtype(x), "alpha"))
    elu = unary(b, "elu", scaled, {"alpha": 1.0})
    binary(b, "mul", elu, scalar(b, alpha, b.dtype(x), "alpha"), out=b.out())


@converts("ThresholdedRelu")
def _thresholded_relu(b: Builder, node: Any, attrs: Attrs) -> None:
    """x where x > alpha else 0."""
    x = node.input[0]
    _float_input(b, x)
    dtype = b.dtype(x)
    above = binary(b, "greater", x, scalar(b, f32(attrs.get("alpha", 1.0)), dtype, "alpha"), dtype="bool")
    where(b, above, x, scalar(b, 0.0, dtype, "zero"), out=b.out())


@converts("Shrink")
def _shrink(b: Builder, node: Any, attrs: Attrs) -> None:
    """x + bias where x < -lambd, x - bias where x > lambd, else 0."""
    x = node.input[0]
    _float_input(b, x)
    dtype, lambd, bias = b.dtype(x), f32(attrs.get("lambd", 0.5)), f32(attrs.get("bias", 0.0))
    above = binary(b, "greater", x, scalar(b, lambd, dtype, "lambd"), dtype="bool")
    below = binary(b, "less", x, scalar(b, -lambd, dtype, "minus_lambd"), dtype="bool")
    shrunk_down = binary(b, "sub", x, scalar(b, bias, dtype, "bias"))
    shrunk_up = binary(b, "add", x, scalar(b, bias, dtype, "bias"))
    upper = where(b, above, shrunk_down, scalar(b, 0.0, dtype, "zero"))
    where(b, below, shrunk_up, upper, out=b.out())


@converts("Mish")
def _mish(b: Builder, node: Any, attrs: Attrs) -> None:
    """x * tanh(softplus(x))."""
    x = node.input[0]
    _float_input(b, x)
    binary(b, "mul", x, unary(b, "tanh", unary(b, "softplus", x)), out=b.out())
