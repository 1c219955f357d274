"""Reductions on the CPU: sum, mean, max, min, argmax, argmin, var, each tuned through a generic schedule.

Shape parameters: `shape` (the input), `axes` (a tuple of axes, negative allowed, or an int)
and `keepdims` (0 or 1). Reductions over the innermost axes use the row schedule (rows in
parallel, each reduced in one pass); reductions that leave the innermost axis use the column
schedule (the reduce loops outside a vector of outputs). sum/max/min of integers accumulate in
the input dtype (numpy would widen a sum to int64); mean and var are for float tensors.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ... import te
from ...topi import reduction as topi
from ..generic import SCHEDULES, classify
from ..task import template
from .elementwise import as_shape
from .rules import first, lanes, largest_fitting


def _keepdims(v: Any, op: str) -> bool:
    if v not in (0, 1) or isinstance(v, float):
        raise ValueError(f"{op}: parameter keepdims must be 0 or 1, got {v!r}")
    return bool(v)


def _axes(v: Any) -> Any:
    return (v,) if isinstance(v, int) else tuple(v)


def _out_shape(x: np.ndarray, axes: Any, keepdims: Any, op: str) -> tuple[int, ...]:
    ax = topi.normalize_axes(x.ndim, _axes(axes), op)
    return topi.reduced_shape(x.shape, ax, bool(keepdims))


def _np_reference(f: Callable[..., np.ndarray], op: str, wide: bool) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, shape: Any, axes: Any, keepdims: Any, **_: Any) -> np.ndarray:
        ax = topi.normalize_axes(x.ndim, _axes(axes), op)
        src = x.astype(np.float64) if wide else x
        out = f(src, axis=ax, keepdims=bool(keepdims))
        return np.asarray(out).astype(x.dtype).reshape(_out_shape(x, axes, keepdims, op))

    return ref


def _first_index_reference(f: Callable[..., np.ndarray], op: str) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, shape: Any, axes: Any, keepdims: Any, **_: Any) -> np.ndarray:
        ax = topi.normalize_axes(x.ndim, _axes(axes), op)
        kept = [d for d in range(x.ndim) if d not in ax]
        moved = np.transpose(x, kept + list(ax)).reshape([x.shape[d] for d in kept] + [-1])
        return f(moved, axis=-1).astype(np.int32).reshape(_out_shape(x, axes, keepdims, op))

    return ref


REDUCTIONS: dict[str, tuple[Callable[..., te.Tensor], Callable[..., np.ndarray], str]] = {
    "sum": (topi.sum, _np_reference(np.sum, "sum", wide=True), "sum over `axes`"),
    "mean": (topi.mean, _np_reference(np.mean, "mean", wide=True), "mean over `axes`"),
    "max": (topi.max, _np_reference(np.max, "max", wide=False), "max over `axes`"),
    "min": (topi.min, _np_reference(np.min, "min", wide=False), "min over `axes`"),
    "argmax": (topi.argmax, _first_index_reference(np.argmax, "argmax"),
               "int32 index of the first max within the row-major flattening of `axes`"),
    "argmin": (topi.argmin, _first_index_reference(np.argmin, "argmin"),
               "int32 index of the first min within the row-major flattening of `axes`"),
    "var": (topi.var, _np_reference(np.var, "var", wide=True), "population variance (ddof=0) over `axes`"),
}


def schedule_reduction(cfg: Any, s: te.Schedule, out: te.Tensor) -> None:
    """The row or column generic schedule, whichever fits the reduced axes."""
    kind = classify(s)
    SCHEDULES["row" if kind in ("row", "other") else kind](cfg, s, out)


LANES = (1, 8, 16, 32)


def _lane_values(shape: tuple[int, ...], axes: Any, op: str) -> list[int]:
    row = topi.row_length(shape, topi.normalize_axes(len(shape), axes, op))
    return [v for v in LANES if v == 1 or v <= row]


def default_lanes(cfg: Any, shape: tuple[int, ...], axes: Any, op: str, dtype: str) -> int:
    """The rule for a reduction's partial accumulators over the innermost axis (1 = plain): one
    vector register of them (the target's lanes, or fewer when the row, the trailing reduced
    axes together, is shorter). `cfg` None: this machine's CPU."""
    return largest_fitting(_lane_values(shape, axes, op), lambda v: v <= lanes(cfg, dtype))


def define_lanes(cfg: Any, shape: tuple[int, ...], axes: tuple[int, ...], op: str, dtype: str) -> int:
    """Knob `lanes`, `default_lanes` first."""
    cfg.define_knob("lanes", first(default_lanes(cfg, shape, axes, op, dtype), _lane_values(shape, axes, op)))
    return cfg["lanes"].val


def _register(name: str, compute: Callable[..., te.Tensor], ref: Callable[..., np.ndarray], what: str) -> None:
    def reduction_template(cfg: Any, shape: Any, axes: Any, keepdims: int, dtype: str = "float32"):
        """The row or column generic schedule. Default: `define_lanes`'s rule (one vector of
        partial sums) and the generic schedule's (its vector tile, threads by work)."""
        x = te.placeholder(as_shape(shape, name, "shape"), dtype, name="x")
        partials = define_lanes(cfg, x.shape, _axes(axes), name, dtype)
        y = compute(x, _axes(axes), _keepdims(keepdims, name), lanes=partials)
        s = te.create_schedule(y.op)
        schedule_reduction(cfg, s, y)
        return s, [x, y]

    reduction_template.__name__ = reduction_template.__qualname__ = f"{name}_template"
    template(name, reference=ref, description=f"y = {what} of x (shape), keepdims 0/1")(reduction_template)


for _name, (_compute, _ref, _what) in REDUCTIONS.items():
    _register(_name, _compute, _ref, _what)
