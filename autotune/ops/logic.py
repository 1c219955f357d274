"""Ops with a bool or another output dtype: equal, less, greater, less_equal, greater_equal (bool,
numpy broadcasting),
logical_not (bool -> bool) and cast (numpy's astype to a dtype kernels support).

Each checks its arguments, naming the op and the argument in every error, then runs the best
known kernel (`autotune.load`).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..dtype import dtype_info
from .elementwise import binary, unary


def _numbers(op: str, *named: tuple[str, Any]) -> None:
    for name, v in named:
        if isinstance(v, np.ndarray) and v.dtype == np.bool_:
            raise TypeError(f"{op}: argument {name} must be a number array, got bool")


def equal(a: Any, b: Any, db: Any = None) -> np.ndarray:
    """a == b, a bool array; numpy broadcasting; a number operand takes the array's dtype."""
    return binary("equal", a, b, False, db, out_dtype=np.bool_)


def _ordered(op: str, symbol: str) -> Callable[..., np.ndarray]:
    def compare(a: Any, b: Any, db: Any = None) -> np.ndarray:
        _numbers(op, ("a", a), ("b", b))
        return binary(op, a, b, False, db, out_dtype=np.bool_)

    compare.__name__ = compare.__qualname__ = op
    compare.__doc__ = f"a {symbol} b, a bool array; numpy broadcasting; a number operand takes the array's dtype."
    return compare


less = _ordered("less", "<")
greater = _ordered("greater", ">")
less_equal = _ordered("less_equal", "<=")
greater_equal = _ordered("greater_equal", ">=")


def logical_not(x: np.ndarray, db: Any = None) -> np.ndarray:
    """not x, for a bool array."""
    if isinstance(x, np.ndarray) and x.dtype != np.bool_:
        raise TypeError(f"logical_not: argument x must be a bool array, got {x.dtype}")
    return unary("logical_not", x, False, db)


def cast(x: np.ndarray, to: Any, db: Any = None) -> np.ndarray:
    """x.astype(to) for `to` a dtype kernels support (float32, int32, int64, bool, ...); floats to
    ints truncate toward zero (out-of-range values are undefined, as in C), nonzero is True."""
    try:
        name = np.dtype(to).name
        dtype_info(name)
    except TypeError:
        raise TypeError(f"cast: argument to must be a dtype kernels support, got {to!r}") from None
    return unary("cast", x, False, db, out_dtype=name, to=name)
