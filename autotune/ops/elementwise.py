"""Elementwise ops: unary math, binary ops with numpy broadcasting, where.

`autotune.ops.relu(x)` etc. check their arguments (numpy arrays, matching dtypes, shapes that
broadcast by numpy's rules, float dtypes for float math), name the op and the argument in every
error, and run the best known kernel for the shapes (`autotune.load`). A 0-d array runs as
shape (1,) and comes back 0-d.
"""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ..runtime import load
from .checks import arrays as checked_arrays, contiguous, float_dtype


def _shape(a: np.ndarray) -> tuple[int, ...]:
    return a.shape if a.ndim else (1,)


def _empty(op: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray | None:
    return np.empty(shape, dtype) if 0 in shape else None


def unary(op: str, x: np.ndarray, float_only: bool, db: Any, out_dtype: Any = None, **params: Any) -> np.ndarray:
    """The kernel of `op` on x (a 0-d array runs as shape (1,)); `params` are its other task
    parameters, `out_dtype` the output's dtype when it is not x's (for an empty x)."""
    dtype = checked_arrays(op, ("x",), (x,), (None,))
    if float_only:
        float_dtype(op, dtype)
    empty = _empty(op, x.shape, out_dtype or x.dtype)
    if empty is not None:
        return empty
    kernel = load(op, db=db, dtype=dtype, shape=_shape(x), **params)
    return kernel(np.ascontiguousarray(x.reshape(_shape(x)))).reshape(x.shape)


def relu(x: np.ndarray, db: Any = None) -> np.ndarray:
    """max(x, 0)."""
    return unary("relu", x, False, db)


def gelu(x: np.ndarray, approximate: str = "none", db: Any = None) -> np.ndarray:
    """x * Phi(x): exact with erf (approximate="none", PyTorch's default) or the tanh form."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: argument approximate must be 'none' or 'tanh', got {approximate!r}")
    return unary("gelu" if approximate == "none" else "gelu_tanh", x, True, db)


def _make_unary(op: str, float_only: bool, doc: str):
    def fn(x: np.ndarray, db: Any = None) -> np.ndarray:
        return unary(op, x, float_only, db)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc
    return fn


silu = _make_unary("silu", True, "x * sigmoid(x).")
sigmoid = _make_unary("sigmoid", True, "1 / (1 + exp(-x)).")
tanh = _make_unary("tanh", True, "tanh(x).")
exp = _make_unary("exp", True, "exp(x).")
log = _make_unary("log", True, "Natural logarithm (NaN below 0, -inf at 0).")
sqrt = _make_unary("sqrt", True, "Square root (NaN below 0).")
rsqrt = _make_unary("rsqrt", True, "1 / sqrt(x).")
neg = _make_unary("neg", False, "-x.")
abs = _make_unary("abs", False, "|x|.")  # numpy's name
reciprocal = _make_unary("reciprocal", True, "1 / x.")
erf = _make_unary("erf", True, "The error function erf(x).")
hard_swish = _make_unary("hard_swish", True, "x * max(0, min(1, x/6 + 1/2)) (ONNX HardSwish).")
floor = _make_unary("floor", True, "The largest whole number <= x.")
ceil = _make_unary("ceil", True, "The smallest whole number >= x.")
round = _make_unary("round", True, "The nearest whole number, halves to the even one (numpy's round).")  # numpy's name
sign = _make_unary("sign", False, "1 above 0, -1 below, else x (0 or NaN).")
softplus = _make_unary("softplus", True, "log(1 + exp(x)), without overflow for large x.")
sin = _make_unary("sin", True, "Sine.")
cos = _make_unary("cos", True, "Cosine.")


def _operand(op: str, name: str, v: Any, like: np.ndarray | None) -> np.ndarray:
    """Arrays pass through; a Python number becomes a 0-d array of the other operand's dtype."""
    if isinstance(v, np.ndarray):
        return v
    if isinstance(v, numbers.Number) and not isinstance(v, bool) and like is not None:
        return np.asarray(v, dtype=like.dtype)
    raise TypeError(f"{op}: argument {name} must be a numpy array (or a number next to an array), "
                    f"got {type(v).__name__}")


def broadcast_shapes(op: str, names: tuple[str, ...], shapes: tuple[tuple[int, ...], ...]) -> tuple[int, ...]:
    """numpy's broadcast of the shapes; a ValueError naming the op and the arguments otherwise."""
    try:
        return np.broadcast_shapes(*shapes)
    except ValueError:
        desc = ", ".join(f"{n} {s}" for n, s in zip(names, shapes))
        raise ValueError(f"{op}: shapes do not broadcast by numpy's rules: {desc}") from None


def binary(op: str, a: Any, b: Any, float_only: bool, db: Any, out_dtype: Any = None) -> np.ndarray:
    """The kernel of `op` on a and b broadcast (numbers take the other operand's dtype);
    `out_dtype` is the output's dtype when it is not theirs (for an empty result)."""
    a = _operand(op, "a", a, b if isinstance(b, np.ndarray) else None)
    b = _operand(op, "b", b, a)
    dtype = checked_arrays(op, ("a", "b"), (a, b), (None, None))
    if float_only:
        float_dtype(op, dtype, "a")
    shape = broadcast_shapes(op, ("a", "b"), (a.shape, b.shape))
    empty = _empty(op, shape, out_dtype or a.dtype)
    if empty is not None:
        return empty
    kernel = load(op, db=db, dtype=dtype, a_shape=_shape(a), b_shape=_shape(b))
    return kernel(*contiguous(a.reshape(_shape(a)), b.reshape(_shape(b)))).reshape(shape)


def _make_binary(op: str, float_only: bool, doc: str):
    def fn(a: Any, b: Any, db: Any = None) -> np.ndarray:
        return binary(op, a, b, float_only, db)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc + " numpy broadcasting; a number operand takes the array's dtype."
    return fn


add = _make_binary("add", False, "a + b.")
sub = _make_binary("sub", False, "a - b.")
mul = _make_binary("mul", False, "a * b.")
div = _make_binary("div", True, "a / b (float tensors).")
maximum = _make_binary("maximum", False, "Elementwise max(a, b).")
minimum = _make_binary("minimum", False, "Elementwise min(a, b).")
power = _make_binary("power", True, "a ** b (float tensors).")


def where(cond: np.ndarray, a: Any, b: Any, db: Any = None) -> np.ndarray:
    """a where cond else b; cond is a bool array; all three broadcast by numpy's rules."""
    if not isinstance(cond, np.ndarray) or cond.dtype != np.bool_:
        raise TypeError(f"where: argument cond must be a bool numpy array, got "
                        f"{cond.dtype if isinstance(cond, np.ndarray) else type(cond).__name__}")
    a = _operand("where", "a", a, b if isinstance(b, np.ndarray) else None)
    b = _operand("where", "b", b, a)
    dtype = checked_arrays("where", ("a", "b"), (a, b), (None, None))
    shape = broadcast_shapes("where", ("cond", "a", "b"), (cond.shape, a.shape, b.shape))
    empty = _empty("where", shape, a.dtype)
    if empty is not None:
        return empty
    kernel = load("where", db=db, dtype=dtype, cond_shape=_shape(cond), a_shape=_shape(a), b_shape=_shape(b))
    return kernel(*contiguous(*(v.reshape(_shape(v)) for v in (cond, a, b)))).reshape(shape)
