"""Activations with float parameters (ONNX LeakyRelu, Elu, HardSigmoid, Clip).

Each checks x (a float array; clip also takes integer arrays) and its floats, naming the op and
the argument in every error, then runs the best known kernel (`autotune.load`); the floats are
task parameters, so a workload key reads e.g. `leaky_relu(shape=8:16,alpha=0.1)float32`.
"""
from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from .elementwise import unary


def _real(op: str, name: str, value: Any, finite: bool = True) -> float:
    """`value` as a float: a real number (not a bool), finite unless `finite` is False, never NaN."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: argument {name} must be a float, got {type(value).__name__} {value!r}")
    v = float(value)
    if math.isnan(v) or (finite and math.isinf(v)):
        raise ValueError(f"{op}: argument {name} must be {'finite' if finite else 'a number, not NaN'}, got {v}")
    return v


def leaky_relu(x: np.ndarray, alpha: float = 0.01, db: Any = None) -> np.ndarray:
    """x where x >= 0, else alpha * x."""
    return unary("leaky_relu", x, True, db, alpha=_real("leaky_relu", "alpha", alpha))


def elu(x: np.ndarray, alpha: float = 1.0, db: Any = None) -> np.ndarray:
    """x where x > 0, else alpha * (exp(x) - 1)."""
    return unary("elu", x, True, db, alpha=_real("elu", "alpha", alpha))


def hard_sigmoid(x: np.ndarray, alpha: float = 0.2, beta: float = 0.5, db: Any = None) -> np.ndarray:
    """max(0, min(1, alpha * x + beta)) (ONNX's defaults)."""
    return unary("hard_sigmoid", x, True, db, alpha=_real("hard_sigmoid", "alpha", alpha),
                 beta=_real("hard_sigmoid", "beta", beta))


def clip(x: np.ndarray, lo: float = -math.inf, hi: float = math.inf, db: Any = None) -> np.ndarray:
    """min(max(x, lo), hi) (lo > hi gives hi, as numpy and ONNX); an infinite bound is no bound.
    Integer arrays take whole-number bounds."""
    lo, hi = _real("clip", "lo", lo, finite=False), _real("clip", "hi", hi, finite=False)
    if isinstance(x, np.ndarray) and x.dtype.kind in "iu":
        for name, v in (("lo", lo), ("hi", hi)):
            if math.isfinite(v) and not v.is_integer():
                raise ValueError(f"clip: argument {name} must be a whole number for {x.dtype} x, got {v}")
    if isinstance(x, np.ndarray) and x.dtype == np.bool_:
        raise TypeError("clip: argument x must be a number array, got bool")
    return unary("clip", x, False, db, lo=lo, hi=hi)
