"""Ops whose output dtype is not the input's, on the CPU: comparisons (equal, less, greater,
less_equal, greater_equal: bool out), logical_not (bool in and out) and cast (to the dtype `to`);
one template per op, each scheduled by the generic injective schedule.

The template dtype is the input dtype. Comparisons take `a_shape` and `b_shape`, broadcast by
numpy's rules (ONNX Equal/Less/Greater/LessOrEqual/GreaterOrEqual); the ordered ones need number
tensors. cast takes `shape`
and `to`, a dtype name: numpy's astype (floats to ints truncate toward zero; nonzero is True).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ... import te
from ...dtype import dtype_info
from ...topi import elementwise as topi
from ..generic import injective_schedule
from ..task import template
from .elementwise import as_shape

COMPARISONS: dict[str, tuple[Callable[..., te.Tensor], Callable[..., np.ndarray]]] = {
    "equal": (topi.equal, np.equal), "less": (topi.less, np.less), "greater": (topi.greater, np.greater),
    "less_equal": (topi.less_equal, np.less_equal), "greater_equal": (topi.greater_equal, np.greater_equal),
}


def _register_comparison(name: str, compute: Callable[..., te.Tensor], ref: Callable[..., np.ndarray]) -> None:
    def comparison_template(cfg: Any, a_shape: Any, b_shape: Any, dtype: str = "float32"):
        """Default: the generic injective schedule's rule (vector tile of the lanes, threads by size)."""
        a = te.placeholder(as_shape(a_shape, name, "a_shape"), dtype, name="a")
        b = te.placeholder(as_shape(b_shape, name, "b_shape"), dtype, name="b")
        y = compute(a, b)
        return injective_schedule(cfg, y), [a, b, y]

    comparison_template.__name__ = comparison_template.__qualname__ = f"{name}_template"
    template(name, reference=lambda a, b, **_: ref(a, b),
             description=f"bool y = {name}(a, b) with numpy broadcasting of a_shape and b_shape")(comparison_template)


for _name, (_compute, _ref) in COMPARISONS.items():
    _register_comparison(_name, _compute, _ref)


@template("logical_not", reference=lambda x, **_: np.logical_not(x),
          description="bool y = not x, elementwise over `shape` (dtype bool)")
def logical_not_template(cfg: Any, shape: Any, dtype: str = "bool"):
    """Default: the generic injective schedule's rule (vector tile of the lanes, threads by size)."""
    x = te.placeholder(as_shape(shape, "logical_not", "shape"), dtype, name="x")
    y = topi.logical_not(x)
    return injective_schedule(cfg, y), [x, y]


def _cast_reference(x: np.ndarray, to: str, **_: Any) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return x.astype(dtype_info(to).numpy)


@template("cast", reference=_cast_reference,
          description="y = x as dtype `to` (numpy astype), elementwise over `shape`; dtype is x's")
def cast_template(cfg: Any, shape: Any, to: str = "float32", dtype: str = "float32"):
    """Default: the generic injective schedule's rule (vector tile of the lanes, threads by size)."""
    try:
        dtype_info(to)
    except TypeError as e:
        raise ValueError(f"cast: parameter to: {e}") from None
    x = te.placeholder(as_shape(shape, "cast", "shape"), dtype, name="x")
    y = topi.cast(x, to)
    return injective_schedule(cfg, y), [x, y]
