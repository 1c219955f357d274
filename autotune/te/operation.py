"""The tensor-expression language: placeholder, compute, extern, reduce_axis, reducers and math (TVM names)."""
from __future__ import annotations

import builtins
import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ..dtype import dtype_info, is_float
from .expr import (
    And,
    BinOp,
    CmpOp,
    Compare,
    Expr,
    IterVar,
    Not,
    Or,
    Reduce,
    Select,
    Var,
    as_bool,
    as_expr,
    binary,
    call,
    const,
)
from .tensor import ComputeOp, ExternOp, PlaceholderOp, Tensor
from .traversal import walk


def _shape(shape: Any, what: str) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"{what}: shape must be a tuple of ints, got {shape!r}") from None
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int) or d <= 0:
            raise ValueError(f"{what}: every dimension must be a positive int, got shape {dims}")
    return dims


def placeholder(shape: Any, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of a static shape."""
    dtype_info(dtype)
    return PlaceholderOp(name, _shape(shape, f"placeholder {name}"), dtype).output(0)


def reduce_axis(dom: Any, name: str = "rv") -> IterVar:
    """A reduction axis over [lo, hi) given as `(lo, hi)`, or over [0, n) given as `n`."""
    lo, hi = (0, dom) if isinstance(dom, int) else tuple(dom)
    if not (isinstance(lo, int) and isinstance(hi, int)) or hi <= lo:
        raise ValueError(f"reduce_axis {name}: expected (lo, hi) ints with hi > lo, got {dom!r}")
    return IterVar(Var(name), lo, hi - lo, "reduce")


def thread_axis(tag: Any = "", name: str = "") -> IterVar:
    """A GPU thread or block index ("blockIdx.x", "threadIdx.y", "vthread") for `Stage.bind`."""
    extent = -1
    if isinstance(tag, tuple):
        (lo, hi), tag = tag
        extent = hi - lo
    valid = {f"{p}.{a}" for p in ("blockIdx", "threadIdx") for a in "xyz"} | {"vthread"}
    if tag not in valid:
        raise ValueError(f"thread_axis: unknown thread tag {tag!r}; expected one of {sorted(valid)}")
    return IterVar(Var(name or tag), 0, extent, "thread", tag)


def _check_vars(body: Expr, allowed: set[Var], where: str) -> None:
    def visit(n: Any) -> None:
        if isinstance(n, Reduce) and n is not body:
            raise ValueError(f"{where}: a reduction must be the whole body of a compute, found {n} inside")
        if isinstance(n, Var) and n not in allowed:
            raise ValueError(
                f"{where}: uses variable {n.name}, which is not one of its axes "
                "(a reduce_axis used outside its reducer?)"
            )

    if isinstance(body, Reduce):
        inner = allowed | {iv.var for iv in body.axis}
        walk(body.source, lambda n: _check_vars_inner(n, inner, where))
        if body.condition is not None:
            walk(body.condition, lambda n: _check_vars_inner(n, inner, where))
    else:
        walk(body, visit)


def _check_vars_inner(n: Any, allowed: set[Var], where: str) -> None:
    if isinstance(n, Reduce):
        raise ValueError(f"{where}: nested reductions are not supported ({n}); use two computes")
    if isinstance(n, Var) and n not in allowed:
        raise ValueError(f"{where}: uses variable {n.name}, which is not one of its axes or reduce axes")


def compute(shape: Any, fcompute: Callable[..., Any], name: str = "compute", tag: str = "") -> Tensor:
    """`out[i, j, ...] = fcompute(i, j, ...)`; the lambda's parameter names name the axes."""
    dims = _shape(shape, f"compute {name}")
    params = list(inspect.signature(fcompute).parameters.values())
    if len(params) == 1 and params[0].kind is inspect.Parameter.VAR_POSITIONAL:
        names = [f"i{d}" for d in range(len(dims))]
    elif len(params) != len(dims):
        raise ValueError(f"compute {name}: fcompute takes {len(params)} indices "
                         f"but the shape has {len(dims)} dimensions")
    else:
        names = [p.name for p in params]
    axis = tuple(IterVar(Var(n), 0, d, "data") for n, d in zip(names, dims))
    body = as_expr(fcompute(*(iv.var for iv in axis)))
    _check_vars(body, {iv.var for iv in axis}, f"compute {name}")
    return ComputeOp(name, axis, body, tag=tag).output(0)


def extern(shape: Any, inputs: Sequence[Tensor], fbuild: Callable[..., Any], name: str = "extern",
           dtype: str | None = None, flop: float = 0.0, reduction: int = 1, tag: str = "") -> Tensor:
    """A tensor written by hand-made loop IR: `fbuild(input_buffers, output_buffer)` returns the
    statement (see `autotune.ir.builder.IRBuilder`). For what compute cannot express; see ExternOp."""
    where = f"extern {name}"
    dims = _shape(shape, where)
    ins = tuple(inputs)
    for k, t in enumerate(ins):
        if not isinstance(t, Tensor):
            raise TypeError(f"{where}: inputs[{k}] must be a te Tensor, got {type(t).__name__}")
    if not callable(fbuild):
        raise TypeError(f"{where}: fbuild must be a function (input buffers, output buffer) -> statement")
    if dtype is None:
        if not ins:
            raise ValueError(f"{where}: give dtype= when there are no inputs")
        dtype = ins[0].dtype
    dtype_info(dtype)
    if not flop >= 0 or isinstance(reduction, bool) or not isinstance(reduction, int) or reduction < 1:
        raise ValueError(f"{where}: flop must be >= 0 and reduction an int >= 1, got {flop!r}, {reduction!r}")
    return ExternOp(name, dims, dtype, ins, fbuild, float(flop), reduction, tag).output(0)


def _reducer(combiner: str) -> Callable[..., Reduce]:
    def reduce(expr: Any, axis: IterVar | Sequence[IterVar], where: Any = None) -> Reduce:
        axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
        if not axes or not builtins.all(isinstance(a, IterVar) and a.kind == "reduce" for a in axes):
            raise ValueError(f"te.{combiner}: axis must be reduce_axis IterVars, got {axis!r}")
        src = as_expr(expr)
        cond = None if where is None else as_bool(where)
        return Reduce(combiner, src, axes, cond)

    reduce.__name__ = combiner
    reduce.__doc__ = f"The {combiner} of `expr` over the reduce axes `axis` (optionally only `where`)."
    return reduce


sum = _reducer("sum")  # TVM's name
max = _reducer("max")
min = _reducer("min")


def all(*conds: Any) -> Expr:
    """Logical and of conditions."""
    out = as_bool(conds[0])
    for c in conds[1:]:
        out = And(out, as_bool(c))
    return out


def any(*conds: Any) -> Expr:
    """Logical or of conditions."""
    out = as_bool(conds[0])
    for c in conds[1:]:
        out = Or(out, as_bool(c))
    return out


def logical_not(cond: Any) -> Expr:
    return Not(as_bool(cond))


def if_then_else(cond: Any, t: Any, f: Any) -> Expr:
    """`t` where `cond` holds, else `f` (both sides are evaluated, so keep them in bounds)."""
    c = as_bool(cond)
    et = as_expr(t) if isinstance(t, Expr) or not isinstance(f, Expr) else as_expr(t, as_expr(f).dtype)
    ef = as_expr(f, et.dtype)
    if et.dtype != ef.dtype:
        raise TypeError(f"if_then_else branches have dtypes {et.dtype} and {ef.dtype}; use .astype")
    return Select(c, et, ef)


def maximum(a: Any, b: Any) -> Expr:
    return binary(BinOp.MAX, a, b)


def minimum(a: Any, b: Any) -> Expr:
    return binary(BinOp.MIN, a, b)


def abs(x: Any) -> Expr:
    e = as_expr(x)
    if is_float(e.dtype):
        return call("fabs", e)
    return Select(Compare(CmpOp.LT, e, const(0, e.dtype)), -e, e)


def power(a: Any, b: Any) -> Expr:
    return call("pow", a, b)


def exp(x: Any) -> Expr: return call("exp", x)
def log(x: Any) -> Expr: return call("log", x)
def sqrt(x: Any) -> Expr: return call("sqrt", x)
def rsqrt(x: Any) -> Expr: return call("rsqrt", x)
def tanh(x: Any) -> Expr: return call("tanh", x)
def sigmoid(x: Any) -> Expr: return call("sigmoid", x)
def erf(x: Any) -> Expr: return call("erf", x)
def floor(x: Any) -> Expr: return call("floor", x)
def ceil(x: Any) -> Expr: return call("ceil", x)
def sin(x: Any) -> Expr: return call("sin", x)
def cos(x: Any) -> Expr: return call("cos", x)
