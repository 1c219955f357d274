"""A te computation evaluated with numpy: the default correctness oracle for computations that
have no hand-written reference (`autotune.create_task_from_te`) and a check on the lowering."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..dtype import dtype_info
from .expr import And, Binary, BinOp, Call, Cast, CmpOp, Compare, Const, Not, Or, Reduce, Select, TensorLoad, Var
from .tensor import ComputeOp, Tensor, post_order

_NP_BINARY = {BinOp.ADD: np.add, BinOp.SUB: np.subtract, BinOp.MUL: np.multiply, BinOp.DIV: np.true_divide,
              BinOp.FLOORDIV: np.floor_divide, BinOp.FLOORMOD: np.mod, BinOp.MAX: np.maximum,
              BinOp.MIN: np.minimum}
_NP_COMPARE = {CmpOp.LT: np.less, CmpOp.LE: np.less_equal, CmpOp.GT: np.greater, CmpOp.GE: np.greater_equal,
               CmpOp.EQ: np.equal, CmpOp.NE: np.not_equal}
_NP_CALL: dict[str, Callable[..., Any]] = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "fabs": np.abs, "floor": np.floor, "ceil": np.ceil,
    "sin": np.sin, "cos": np.cos,
    "pow": np.power, "erf": lambda x: np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype),
}
_NP_REDUCE: dict[str, Callable[..., Any]] = {"sum": np.sum, "max": np.max, "min": np.min}
EVAL_CHUNK = 1 << 22       # grid points per evaluation step (bounds the memory of a reduction)


def evaluate_te(outs: Sequence[Tensor], ins: Sequence[Tensor], arrays: Sequence[Any]) -> list[Any]:
    """The outputs of a te computation, computed by numpy from the input arrays (a test oracle:
    every stage is evaluated whole, in float64 where numpy promotes, then cast to its dtype)."""
    values: dict[int, np.ndarray] = {id(t.op): np.asarray(a) for t, a in zip(ins, arrays)}
    with np.errstate(all="ignore"):
        for op in post_order(t.op for t in outs):
            if isinstance(op, ComputeOp):
                values[id(op)] = _eval_op(op, values)
            elif id(op) not in values:
                raise TypeError(f"evaluate_te: {op.name} is not a compute (an extern op has no expression "
                                "to evaluate) and not among the inputs")
    return [values[id(t.op)] for t in outs]


def _eval_op(op: ComputeOp, values: dict[int, np.ndarray]) -> np.ndarray:
    out: np.ndarray = np.empty(op.shape, dtype=dtype_info(op.dtype).numpy)
    raxes = list(op.reduce_axis)
    per_row = math.prod(op.shape[1:]) * math.prod(iv.extent for iv in raxes)
    step = max(1, EVAL_CHUNK // max(per_row, 1))
    for lo in range(0, op.shape[0], step):
        hi = min(lo + step, op.shape[0])
        ndim = len(op.axis) + len(raxes)
        env: dict[Any, Any] = {}
        for d, iv in enumerate([*op.axis, *raxes]):
            rng = np.arange(lo, hi) if d == 0 else np.arange(iv.dom_min, iv.dom_min + iv.extent)
            env[iv.var] = rng.astype(np.int64).reshape([-1 if e == d else 1 for e in range(ndim)])
        body = op.body
        if isinstance(body, Reduce):
            src = _eval(body.source, env, values)
            if body.condition is not None:
                ident = _identity(body.combiner, op.dtype)
                src = np.where(_eval(body.condition, env, values), src, ident)
            full = np.broadcast_to(src, [hi - lo, *op.shape[1:], *(iv.extent for iv in raxes)])
            res = _NP_REDUCE[body.combiner](full, axis=tuple(range(len(op.axis), ndim))) if raxes else full
        else:
            res = np.broadcast_to(_eval(body, env, values), [hi - lo, *op.shape[1:]])
        out[lo:hi] = res
    return out


def _identity(combiner: str, dtype: str) -> Any:
    np_dtype: np.dtype[Any] = np.dtype(dtype_info(dtype).numpy)
    if combiner == "sum":
        return np_dtype.type(0)
    if np_dtype.kind == "f":
        return np_dtype.type(-np.inf if combiner == "max" else np.inf)
    info = np.iinfo(np_dtype)
    return np_dtype.type(info.min if combiner == "max" else info.max)


def _eval(e: Any, env: dict[Any, Any], values: dict[int, np.ndarray]) -> Any:
    t = type(e)
    if type(e) is Var:
        return env[e]
    if type(e) is Const:
        return np.asarray(e.value, dtype=dtype_info(e.dtype).numpy)
    if type(e) is Binary:
        return _NP_BINARY[e.op](_eval(e.a, env, values), _eval(e.b, env, values)).astype(
            dtype_info(e.dtype).numpy, copy=False)
    if type(e) is Compare:
        return _NP_COMPARE[e.op](_eval(e.a, env, values), _eval(e.b, env, values))
    if t is And or t is Or:
        f = np.logical_and if t is And else np.logical_or
        return f(_eval(e.a, env, values), _eval(e.b, env, values))
    if type(e) is Not:
        return np.logical_not(_eval(e.a, env, values))
    if type(e) is Select:
        return np.where(_eval(e.cond, env, values), _eval(e.t, env, values), _eval(e.f, env, values))
    if type(e) is Call:
        args = [np.asarray(_eval(a, env, values)) for a in e.args]
        return np.asarray(_NP_CALL[e.fn](*args)).astype(dtype_info(e.dtype).numpy, copy=False)
    if type(e) is Cast:
        return np.asarray(_eval(e.value, env, values)).astype(dtype_info(e.dtype).numpy)
    if type(e) is TensorLoad:
        arr = values[id(e.tensor.op)]
        # untaken if_then_else branches may index out of range: clip (their values are discarded)
        idx = tuple(np.clip(_eval(i, env, values), 0, n - 1) for i, n in zip(e.indices, arr.shape))
        return arr[idx]
    raise TypeError(f"evaluate_te: unsupported expression {t.__name__}")
