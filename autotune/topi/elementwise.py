"""Elementwise ops as te computes: unary math, binary ops with numpy broadcasting, and where.

Every op is one injective stage (tag "elemwise" or "broadcast") named after the op, so a chain
of them is fused into one loop nest by `autotune.schedules.generic.schedule_injective`.
Broadcasting follows numpy: shapes align at the right, a dimension of 1 stretches.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import te
from ..dtype import dtype_info, is_float
from ..te.expr import Expr

ELEMWISE = "elemwise"
BROADCAST = "broadcast"
GELU_C = math.sqrt(2.0 / math.pi)   # gelu tanh form: 0.5 x (1 + tanh(GELU_C (x + 0.044715 x^3)))


def float_only(op: str, x: te.Tensor) -> None:
    """A TypeError naming the op unless x is a float tensor (for float math: exp, mean, ...)."""
    if not is_float(x.dtype):
        raise TypeError(f"{op}: argument x must be a float tensor, got {x.dtype}")


def elementwise(x: te.Tensor, f: Callable[[Expr], Expr], name: str) -> te.Tensor:
    """y[i...] = f(x[i...])."""
    return te.compute(x.shape, lambda *i: f(x[i]), name=name, tag=ELEMWISE)


def _zero(x: te.Tensor) -> Expr:
    return te.const(0, x.dtype)


def relu(x: te.Tensor) -> te.Tensor:
    return elementwise(x, lambda v: te.maximum(v, _zero(x)), "relu")


def gelu_tanh_expr(v: Expr) -> Expr:
    """0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))), the tanh approximation of gelu, on one value
    (also the dense_gelu epilogue)."""
    inner = v * (te.const(GELU_C, v.dtype) + te.const(GELU_C * 0.044715, v.dtype) * v * v)
    return te.const(0.5, v.dtype) * v * (te.const(1.0, v.dtype) + te.tanh(inner))


def gelu_tanh_reference(x: np.ndarray) -> np.ndarray:
    """gelu_tanh_expr in numpy."""
    return 0.5 * x * (1.0 + np.tanh(GELU_C * (x + 0.044715 * x ** 3)))


def gelu(x: te.Tensor, approximate: str = "none") -> te.Tensor:
    """x * Phi(x): with erf ("none", PyTorch's default) or the tanh approximation ("tanh")."""
    float_only("gelu", x)
    if approximate == "none":
        return elementwise(x, lambda v: 0.5 * v * (1.0 + te.erf(v * (1.0 / math.sqrt(2.0)))), "gelu")
    if approximate == "tanh":
        return elementwise(x, gelu_tanh_expr, "gelu_tanh")
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def silu(x: te.Tensor) -> te.Tensor:
    float_only("silu", x)
    return elementwise(x, lambda v: v * te.sigmoid(v), "silu")


def _unary_call(name: str, fn: Callable[[Expr], Expr]) -> Callable[[te.Tensor], te.Tensor]:
    def op(x: te.Tensor) -> te.Tensor:
        float_only(name, x)
        return elementwise(x, fn, name)

    op.__name__ = name
    op.__doc__ = f"y = {name}(x), elementwise (float tensors)."
    return op


sigmoid = _unary_call("sigmoid", te.sigmoid)
tanh = _unary_call("tanh", te.tanh)
exp = _unary_call("exp", te.exp)
log = _unary_call("log", te.log)
sqrt = _unary_call("sqrt", te.sqrt)
rsqrt = _unary_call("rsqrt", te.rsqrt)
reciprocal = _unary_call("reciprocal", lambda v: 1.0 / v)
erf = _unary_call("erf", te.erf)
sin = _unary_call("sin", te.sin)
cos = _unary_call("cos", te.cos)


# -- parameterised activations (ONNX's LeakyRelu, Elu, HardSigmoid, HardSwish, Clip) ----------------
def _c(v: Expr, value: float) -> Expr:
    return te.const(value, v.dtype)


def leaky_relu(x: te.Tensor, alpha: float) -> te.Tensor:
    """x where x >= 0, else alpha * x."""
    float_only("leaky_relu", x)
    return elementwise(x, lambda v: te.if_then_else(v < _c(v, 0.0), _c(v, alpha) * v, v), "leaky_relu")


def elu(x: te.Tensor, alpha: float) -> te.Tensor:
    """x where x > 0, else alpha * (exp(x) - 1); exp reads min(x, 0), so the branch not taken never
    overflows."""
    float_only("elu", x)
    return elementwise(x, lambda v: te.if_then_else(
        v > _c(v, 0.0), v, _c(v, alpha) * (te.exp(te.minimum(v, _c(v, 0.0))) - _c(v, 1.0))), "elu")


def _unit_clamp(v: Expr) -> Expr:
    return te.minimum(te.maximum(v, _c(v, 0.0)), _c(v, 1.0))


def hard_sigmoid(x: te.Tensor, alpha: float, beta: float) -> te.Tensor:
    """max(0, min(1, alpha * x + beta))."""
    float_only("hard_sigmoid", x)
    return elementwise(x, lambda v: _unit_clamp(_c(v, alpha) * v + _c(v, beta)), "hard_sigmoid")


def floor(x: te.Tensor) -> te.Tensor:
    float_only("floor", x)
    return elementwise(x, te.floor, "floor")


def ceil(x: te.Tensor) -> te.Tensor:
    float_only("ceil", x)
    return elementwise(x, te.ceil, "ceil")


def round_half_even(x: te.Tensor) -> te.Tensor:
    """x rounded to the nearest whole number, halves to the even one (numpy's round, ONNX Round):
    floor(x) + 1 when the fraction is over 1/2, or exactly 1/2 with floor(x) odd."""
    float_only("round", x)

    def rounded(v: Expr) -> Expr:
        low = te.floor(v)
        fraction = v - low
        odd = low - _c(v, 2.0) * te.floor(low * _c(v, 0.5))
        up = te.if_then_else(fraction == _c(v, 0.5), odd == _c(v, 1.0), fraction > _c(v, 0.5))
        return te.if_then_else(up, low + _c(v, 1.0), low)

    return elementwise(x, rounded, "round")


def sign(x: te.Tensor) -> te.Tensor:
    """1 above 0, -1 below, else x itself (0, -0 or NaN), as numpy's sign."""
    one, zero = te.const(1, x.dtype), _zero(x)
    return elementwise(x, lambda v: te.if_then_else(v > zero, one, te.if_then_else(v < zero, -one, v)), "sign")


def softplus(x: te.Tensor) -> te.Tensor:
    """log(1 + exp(x)) as max(x, 0) + log1p(exp(-|x|)): no overflow for large x, and accurate for
    very negative x, with log1p(e) = log(u) * e / (u - 1), u = 1 + e (e itself where u rounds to 1)."""
    float_only("softplus", x)

    def value(v: Expr) -> Expr:
        e = te.exp(-te.abs(v))
        u = _c(v, 1.0) + e
        log1p = te.if_then_else(u == _c(v, 1.0), e, te.log(u) * e / (u - _c(v, 1.0)))
        return te.maximum(v, _c(v, 0.0)) + log1p

    return elementwise(x, value, "softplus")


def hard_swish(x: te.Tensor) -> te.Tensor:
    """x * hard_sigmoid(x) with alpha 1/6, beta 1/2 (ONNX HardSwish, PyTorch's Hardswish)."""
    float_only("hard_swish", x)
    return elementwise(x, lambda v: v * _unit_clamp(v * _c(v, 1.0 / 6.0) + _c(v, 0.5)), "hard_swish")


def clip(x: te.Tensor, lo: float, hi: float) -> te.Tensor:
    """min(max(x, lo), hi), numpy's and ONNX's order (lo > hi gives hi). An infinite bound is no
    bound; on integer tensors a finite bound must be a whole number."""
    def bound(v: Expr, value: float, name: str, f: Callable[[Expr, Expr], Expr]) -> Expr:
        if math.isinf(value):
            return v
        if not is_float(x.dtype) and not float(value).is_integer():
            raise ValueError(f"clip: parameter {name} must be a whole number for {x.dtype}, got {value}")
        return f(v, te.const(value, x.dtype))

    return elementwise(x, lambda v: bound(bound(v, lo, "lo", te.maximum), hi, "hi", te.minimum), "clip")


def logical_not(x: te.Tensor) -> te.Tensor:
    """not x, for a bool tensor."""
    if x.dtype != "bool":
        raise TypeError(f"logical_not: argument x must be a bool tensor, got {x.dtype}")
    return elementwise(x, te.logical_not, "logical_not")


def cast(x: te.Tensor, to: str) -> te.Tensor:
    """x as dtype `to`, numpy's astype (floats to ints truncate toward zero, nonzero is True)."""
    dtype_info(to)
    return elementwise(x, lambda v: v.astype(to), "cast")


def neg(x: te.Tensor) -> te.Tensor:
    return elementwise(x, lambda v: -v, "neg")


def abs(x: te.Tensor) -> te.Tensor:  # numpy's name
    return elementwise(x, te.abs, "abs")


# -- broadcasting --------------------------------------------------------------------------------
def broadcast_shape(*shapes: Sequence[int], op: str = "broadcast") -> tuple[int, ...]:
    """numpy's broadcast of `shapes`; a ValueError naming the op and the shapes otherwise."""
    ndim = max(len(s) for s in shapes)
    out = []
    for d in range(ndim):
        dims = {s[len(s) - ndim + d] for s in shapes if len(s) - ndim + d >= 0} - {1}
        if len(dims) > 1:
            raise ValueError(f"{op}: shapes {', '.join(str(tuple(s)) for s in shapes)} do not broadcast "
                             f"(dimension {d} of the result)")
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def broadcast_load(t: te.Tensor, idx: Sequence[Any]) -> Expr:
    """t read at output index `idx` (right-aligned; dimensions of extent 1 read index 0)."""
    lead = len(idx) - t.ndim
    return t[tuple(0 if n == 1 else idx[lead + d] for d, n in enumerate(t.shape))]


Operand = Any  # te.Tensor, or a Python number (a constant of the other operand's dtype)


def _value(x: Operand, idx: Sequence[Any], dtype: str) -> Expr:
    return broadcast_load(x, idx) if isinstance(x, te.Tensor) else te.const(x, dtype)


def broadcast(f: Callable[..., Expr], name: str, *xs: Operand) -> te.Tensor:
    """out[i...] = f(x0[i...], x1[i...], ...) with numpy broadcasting of the tensor operands."""
    tensors = [x for x in xs if isinstance(x, te.Tensor)]
    if not tensors:
        raise TypeError(f"{name}: at least one operand must be a tensor")
    dtypes = {t.dtype for t in tensors if t.dtype != "bool"} or {"bool"}
    if len(dtypes) > 1:
        raise TypeError(f"{name}: operands have dtypes {sorted(dtypes)}; they must match")
    dtype = dtypes.pop()
    shape = broadcast_shape(*(t.shape for t in tensors), op=name)
    return te.compute(shape, lambda *i: f(*(_value(x, i, dtype) for x in xs)), name=name, tag=BROADCAST)


def _binary(name: str, fn: Callable[[Expr, Expr], Expr], float_only: bool = False) -> Callable[..., te.Tensor]:
    def op(a: Operand, b: Operand) -> te.Tensor:
        if float_only:
            for arg, v in (("a", a), ("b", b)):
                if isinstance(v, te.Tensor) and not is_float(v.dtype):
                    raise TypeError(f"{name}: argument {arg} must be a float tensor, got {v.dtype}")
        return broadcast(fn, name, a, b)

    op.__name__ = name
    op.__doc__ = f"out = {name}(a, b) with numpy broadcasting."
    return op


add = _binary("add", lambda a, b: a + b)
sub = _binary("sub", lambda a, b: a - b)
mul = _binary("mul", lambda a, b: a * b)
def _divide(a: Expr, b: Expr) -> Expr:
    """a / b; for integers C's division, truncating toward zero (ONNX Div), built on floor
    division, whose code routes a zero divisor (giving 0) and -1 around the trapping sdiv."""
    if is_float(a.dtype):
        return a / b
    q = a // b
    if dtype_info(a.dtype).kind != "int":
        return q
    zero = te.const(0, a.dtype)
    signs_differ = te.if_then_else(a < zero, b >= zero, b < zero)
    return q + te.if_then_else(te.all(a % b != zero, signs_differ), te.const(1, a.dtype), zero)


def divide_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy's true division for floats; for integers what `_divide` computes (0 for a zero divisor)."""
    dtype = np.result_type(a, b)
    if dtype.kind == "f":
        return np.true_divide(a, b)
    with np.errstate(all="ignore"):
        safe = np.where(b == 0, 1, b).astype(dtype)
        q, r = np.floor_divide(a, safe), np.remainder(a, safe)
        if dtype.kind == "i":
            q = q + ((r != 0) & ((a < 0) != (b < 0)))
        return np.where(b == 0, 0, q).astype(dtype)


div = _binary("div", _divide)
maximum = _binary("maximum", te.maximum)
minimum = _binary("minimum", te.minimum)
power = _binary("power", te.power, float_only=True)



def _compare(name: str, fn: Callable[[Expr, Expr], Expr], ordered: bool) -> Callable[..., te.Tensor]:
    def op(a: Operand, b: Operand) -> te.Tensor:
        for arg, v in (("a", a), ("b", b)):
            if ordered and isinstance(v, te.Tensor) and v.dtype == "bool":
                raise TypeError(f"{name}: argument {arg} must be a number tensor, got bool")
        return broadcast(fn, name, a, b)

    op.__name__ = name
    op.__doc__ = f"out = {name}(a, b), a bool tensor, with numpy broadcasting."
    return op


equal = _compare("equal", lambda a, b: a == b, ordered=False)
less = _compare("less", lambda a, b: a < b, ordered=True)
greater = _compare("greater", lambda a, b: a > b, ordered=True)
less_equal = _compare("less_equal", lambda a, b: a <= b, ordered=True)
greater_equal = _compare("greater_equal", lambda a, b: a >= b, ordered=True)


def expand(x: te.Tensor, out_shape: Sequence[int]) -> te.Tensor:
    """numpy's broadcast_to(x, out_shape), materialised (ONNX Expand once its shape is resolved)."""
    if broadcast_shape(x.shape, out_shape, op="expand") != tuple(out_shape):
        raise ValueError(f"expand: shape {tuple(x.shape)} does not broadcast to out_shape {tuple(out_shape)}")
    return te.compute(tuple(out_shape), lambda *i: broadcast_load(x, i), name="expand", tag=BROADCAST)


def where(cond: te.Tensor, a: Operand, b: Operand) -> te.Tensor:
    """out = a where cond else b (cond a bool tensor), with numpy broadcasting of all three."""
    if not isinstance(cond, te.Tensor) or cond.dtype != "bool":
        got = getattr(cond, "dtype", type(cond).__name__)
        raise TypeError(f"where: argument cond must be a bool tensor, got {got}")
    return broadcast(lambda c, x, y: te.if_then_else(c, x, y), "where", cond, a, b)
