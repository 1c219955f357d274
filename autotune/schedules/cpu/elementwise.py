"""Elementwise ops on the CPU: one template per op, all scheduled by the generic injective schedule.

Shape parameters: unary ops take `shape` (a tuple, or an int for 1-d); binary ops take `a_shape`
and `b_shape`, broadcast with numpy's rules; `where` takes `cond_shape`, `a_shape`, `b_shape`
(cond is a bool tensor, a and b are of the task's dtype). The numpy references compute in
float64 and round to the task's dtype, so they are the exact answer the kernels approximate.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import te
from ...topi import elementwise as topi
from ..generic import injective_schedule
from ..task import template


def as_shape(v: Any, op: str, name: str) -> tuple[int, ...]:
    """A shape parameter: an int (1-d) or a tuple of positive ints; errors name the op and parameter."""
    t = (v,) if isinstance(v, int) and not isinstance(v, bool) else tuple(v) if isinstance(v, (tuple, list)) else None
    if not t or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in t):
        raise ValueError(f"{op}: parameter {name} must be a tuple of positive ints, got {v!r}")
    return t


def exact_reference(f: Callable[..., Any]) -> Callable[..., Any]:
    """A reference computed in float64 (floats) and rounded to the inputs' dtype."""
    def ref(*arrays: np.ndarray, **_: Any) -> np.ndarray:
        dtype = arrays[-1].dtype
        with np.errstate(all="ignore"):
            wide = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in arrays]
            return np.asarray(f(*wide)).astype(dtype)

    return ref


_erf = np.vectorize(math.erf, otypes=[np.float64])

UNARY: dict[str, tuple[Callable[[te.Tensor], te.Tensor], Callable[[np.ndarray], Any], str]] = {
    "relu": (topi.relu, lambda x: np.maximum(x, 0), "max(x, 0)"),
    "gelu": (topi.gelu, lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), "x * Phi(x) with erf (exact GELU)"),
    "gelu_tanh": (lambda x: topi.gelu(x, "tanh"),
                  topi.gelu_tanh_reference,
                  "GELU, tanh approximation"),
    "silu": (topi.silu, lambda x: x / (1 + np.exp(-x)), "x * sigmoid(x)"),
    "sigmoid": (topi.sigmoid, lambda x: 1 / (1 + np.exp(-x)), "1 / (1 + exp(-x))"),
    "tanh": (topi.tanh, np.tanh, "tanh(x)"),
    "exp": (topi.exp, np.exp, "exp(x)"),
    "log": (topi.log, np.log, "natural log"),
    "sqrt": (topi.sqrt, np.sqrt, "square root"),
    "rsqrt": (topi.rsqrt, lambda x: 1 / np.sqrt(x), "1 / sqrt(x)"),
    "neg": (topi.neg, np.negative, "-x"),
    "abs": (topi.abs, np.abs, "|x|"),
    "reciprocal": (topi.reciprocal, lambda x: 1 / x, "1 / x"),
    "erf": (topi.erf, _erf, "the error function erf(x)"),
    "hard_swish": (topi.hard_swish, lambda x: x * np.clip(x / 6 + 0.5, 0, 1), "x * max(0, min(1, x/6 + 1/2))"),
    "floor": (topi.floor, np.floor, "largest whole number <= x"),
    "ceil": (topi.ceil, np.ceil, "smallest whole number >= x"),
    "round": (topi.round_half_even, np.round, "nearest whole number, halves to even"),
    "sign": (topi.sign, np.sign, "-1, 0 or 1 by the sign of x"),
    "softplus": (topi.softplus, lambda x: np.logaddexp(x, 0), "log(1 + exp(x))"),
    "sin": (topi.sin, np.sin, "sine"),
    "cos": (topi.cos, np.cos, "cosine"),
}

BINARY: dict[str, tuple[Callable[..., te.Tensor], Callable[..., Any]]] = {
    "add": (topi.add, np.add), "sub": (topi.sub, np.subtract), "mul": (topi.mul, np.multiply),
    "div": (topi.div, topi.divide_reference), "maximum": (topi.maximum, np.maximum),
    "minimum": (topi.minimum, np.minimum), "power": (topi.power, np.power),
}


def _where_reference(cond: np.ndarray, a: np.ndarray, b: np.ndarray, **_: Any) -> np.ndarray:
    return np.where(cond, a, b)


def register_elementwise(target: str, schedule: Callable[[Any, te.Tensor], Any]) -> None:
    """Register every elementwise op (UNARY, BINARY, where) for `target`, each output scheduled
    by `schedule(cfg, y)`: the computes, parameters and references are shared by every target."""
    def unary(name: str, compute: Callable[[te.Tensor], te.Tensor], ref: Callable, what: str) -> None:
        def unary_template(cfg: Any, shape: Any, dtype: str = "float32"):
            """Default: `schedule`'s rule (for the CPU, the generic injective one)."""
            x = te.placeholder(as_shape(shape, name, "shape"), dtype, name="x")
            y = compute(x)
            return schedule(cfg, y), [x, y]

        unary_template.__name__ = unary_template.__qualname__ = f"{name}_template"
        template(name, reference=exact_reference(ref), target=target,
                 description=f"y = {what}, elementwise over `shape`")(unary_template)

    def binary(name: str, compute: Callable[..., te.Tensor], ref: Callable) -> None:
        def binary_template(cfg: Any, a_shape: Any, b_shape: Any, dtype: str = "float32"):
            """Default: `schedule`'s rule (for the CPU, the generic injective one)."""
            a = te.placeholder(as_shape(a_shape, name, "a_shape"), dtype, name="a")
            b = te.placeholder(as_shape(b_shape, name, "b_shape"), dtype, name="b")
            y = compute(a, b)
            return schedule(cfg, y), [a, b, y]

        binary_template.__name__ = binary_template.__qualname__ = f"{name}_template"
        template(name, reference=exact_reference(ref), target=target,
                 description=f"y = {name}(a, b) with numpy broadcasting of a_shape and b_shape")(binary_template)

    def where_template(cfg: Any, cond_shape: Any, a_shape: Any, b_shape: Any, dtype: str = "float32"):
        """Default: `schedule`'s rule (for the CPU, the generic injective one)."""
        cond = te.placeholder(as_shape(cond_shape, "where", "cond_shape"), "bool", name="cond")
        a = te.placeholder(as_shape(a_shape, "where", "a_shape"), dtype, name="a")
        b = te.placeholder(as_shape(b_shape, "where", "b_shape"), dtype, name="b")
        y = topi.where(cond, a, b)
        return schedule(cfg, y), [cond, a, b, y]

    for name, (compute, ref, what) in UNARY.items():
        unary(name, compute, ref, what)
    for name, (compute, ref) in BINARY.items():
        binary(name, compute, ref)
    template("where", reference=_where_reference, target=target,
             description="y = a where cond else b (cond bool), numpy broadcasting of all three shapes")(where_template)


register_elementwise("llvm", injective_schedule)
