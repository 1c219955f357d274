"""Tensor expressions, with TVM's names: what to compute, separate from how (the schedule)."""
from .expr import Expr, IterVar, Var, const
from .operation import (abs, all, any, ceil, compute, erf, exp, extern, floor, if_then_else, log,
                        logical_not, max, maximum, min, minimum, placeholder, power, reduce_axis,
                        rsqrt, sigmoid, sqrt, sum, tanh, thread_axis)
from .tensor import ComputeOp, ExternOp, Operation, PlaceholderOp, Tensor

from ..schedules.schedule import Schedule, Stage, create_schedule  # noqa: E402  (TVM's te.create_schedule)

__all__ = [
    "Expr", "IterVar", "Var", "const", "abs", "all", "any", "ceil", "compute", "erf", "exp", "extern", "floor",
    "if_then_else", "log", "logical_not", "max", "maximum", "min", "minimum", "placeholder", "power",
    "reduce_axis", "rsqrt", "sigmoid", "sqrt", "sum", "tanh", "thread_axis", "ComputeOp", "ExternOp", "Operation",
    "PlaceholderOp", "Tensor", "Schedule", "Stage", "create_schedule",
]
