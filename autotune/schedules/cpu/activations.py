"""Activations with float parameters on the CPU (ONNX LeakyRelu, Elu, HardSigmoid, Clip): one
template per op, each scheduled by the generic injective schedule.

Shape parameter `shape` (a tuple, or an int for 1-d) plus the op's floats, whose defaults are
ONNX's attribute defaults. Clip's `lo`/`hi` may be -inf/inf: no bound (ONNX Clip without min or
max). References compute in float64 and round to the task's dtype, like the other elementwise ops.
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
from .elementwise import as_shape, exact_reference


def exact_with_params(f: Callable[..., Any]) -> Callable[..., Any]:
    """`exact_reference` of f(x, **params): the float parameters reach the numpy formula."""
    def ref(x: np.ndarray, **params: Any) -> np.ndarray:
        return exact_reference(lambda v: f(v, **params))(x)

    return ref


def _x(op: str, shape: Any, dtype: str) -> te.Tensor:
    return te.placeholder(as_shape(shape, op, "shape"), dtype, name="x")


@template("leaky_relu", reference=exact_with_params(lambda x, alpha, **_: np.where(x >= 0, x, alpha * x)),
          description="y = x where x >= 0 else alpha * x, elementwise over `shape`")
def leaky_relu_template(cfg: Any, shape: Any, alpha: float = 0.01, dtype: str = "float32"):
    """Default: the generic injective schedule\'s rule (vector tile of the lanes, threads by size)."""
    x = _x("leaky_relu", shape, dtype)
    y = topi.leaky_relu(x, alpha)
    return injective_schedule(cfg, y), [x, y]


def _elu_reference(x: np.ndarray, alpha: float, **_: Any) -> np.ndarray:
    return np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0)))


@template("elu", reference=exact_with_params(_elu_reference),
          description="y = x where x > 0 else alpha * (exp(x) - 1), elementwise over `shape`")
def elu_template(cfg: Any, shape: Any, alpha: float = 1.0, dtype: str = "float32"):
    """Default: the generic injective schedule\'s rule (vector tile of the lanes, threads by size)."""
    x = _x("elu", shape, dtype)
    y = topi.elu(x, alpha)
    return injective_schedule(cfg, y), [x, y]


@template("hard_sigmoid", reference=exact_with_params(lambda x, alpha, beta, **_: np.clip(alpha * x + beta, 0, 1)),
          description="y = max(0, min(1, alpha * x + beta)), elementwise over `shape`")
def hard_sigmoid_template(cfg: Any, shape: Any, alpha: float = 0.2, beta: float = 0.5, dtype: str = "float32"):
    """Default: the generic injective schedule\'s rule (vector tile of the lanes, threads by size)."""
    x = _x("hard_sigmoid", shape, dtype)
    y = topi.hard_sigmoid(x, alpha, beta)
    return injective_schedule(cfg, y), [x, y]


def _clip_reference(x: np.ndarray, lo: float, hi: float, **_: Any) -> np.ndarray:
    return np.minimum(np.maximum(x, lo), hi)


@template("clip", reference=exact_with_params(_clip_reference),
          description="y = min(max(x, lo), hi) over `shape`; lo=-inf / hi=inf: no bound")
def clip_template(cfg: Any, shape: Any, lo: float = -math.inf, hi: float = math.inf, dtype: str = "float32"):
    """Default: the generic injective schedule\'s rule (vector tile of the lanes, threads by size)."""
    x = _x("clip", shape, dtype)
    if dtype == "bool":
        raise TypeError("clip: argument x must be a number tensor, got bool")
    y = topi.clip(x, lo, hi)
    return injective_schedule(cfg, y), [x, y]
