"""Reductions over any set of axes, with keepdims: sum, mean, max, min, argmax, argmin, var.

Each op is one reduction stage (tag "comm_reduce"; two with `lanes`, see `lane_partials`) plus,
where the math needs it, pointwise stages and a second reduction: mean = sum / n;
var = sum((x - mean)^2) / n (population variance, numpy's ddof=0, two passes for accuracy);
argmax = the max, then the smallest flat index k of the reduced block with x == max (numpy's
first-occurrence rule); argmin alike with the min. Over several axes they return the index into
the row-major flattening of those axes (np.argmax of a flattened block).

A full reduction without keepdims has shape (1,) here (te tensors have at least one dimension);
`autotune.ops` returns numpy's 0-d array.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .. import te
from ..te.expr import Expr
from .elementwise import float_only

REDUCE = "comm_reduce"


def normalize_axes(ndim: int, axes: Any, op: str = "reduce") -> tuple[int, ...]:
    """Sorted, non-negative, unique axes; None means all. Errors name the op and the axis."""
    if axes is None:
        return tuple(range(ndim))
    if isinstance(axes, int):
        axes = (axes,)
    out = []
    for a in axes:
        if isinstance(a, bool) or not isinstance(a, int) or not -ndim <= a < ndim:
            raise ValueError(f"{op}: axis {a!r} is out of range for a {ndim}-d tensor")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: axis {tuple(axes)} repeats an axis")
    if not out:
        raise ValueError(f"{op}: axes must name at least one axis")
    return tuple(sorted(out))


def reduced_shape(shape: Sequence[int], axes: Sequence[int], keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if d in axes else n for d, n in enumerate(shape))
    return tuple(n for d, n in enumerate(shape) if d not in axes) or (1,)


class _Reduced:
    """The index bookkeeping shared by every reduction: output index -> input index."""

    def __init__(self, x: te.Tensor, axes: Any, keepdims: bool, op: str) -> None:
        self.x, self.op, self.keepdims = x, op, bool(keepdims)
        self.axes = normalize_axes(x.ndim, axes, op)
        self.shape = reduced_shape(x.shape, self.axes, self.keepdims)
        self.count = math.prod(x.shape[d] for d in self.axes)

    def raxes(self, tag: str) -> list[te.IterVar]:
        return [te.reduce_axis((0, self.x.shape[d]), name=f"{tag}{d}") for d in self.axes]

    def full_index(self, out_idx: Sequence[Any], rvars: Sequence[Any]) -> tuple[Any, ...]:
        """The input index of output element `out_idx` and reduce-axis values `rvars`."""
        rv, kept = iter(rvars), iter(out_idx)
        idx = []
        for d in range(self.x.ndim):
            if d in self.axes:
                idx.append(next(rv))
                if self.keepdims:
                    next(kept)
            else:
                idx.append(next(kept))
        return tuple(idx)

    def has_kept(self) -> bool:
        """Whether the output index maps to input dimensions (False for a full reduction to (1,))."""
        return self.keepdims or len(self.axes) < self.x.ndim

    def out_of_full(self, full: Sequence[Any]) -> tuple[Any, ...]:
        """The statistic's index for an input index (0 on reduced axes when keepdims)."""
        if self.keepdims:
            return tuple(0 if d in self.axes else i for d, i in enumerate(full))
        kept = tuple(i for d, i in enumerate(full) if d not in self.axes)
        return kept or (0,)


def row_dims(ndim: int, axes: Sequence[int]) -> list[int]:
    """The trailing run of reduced dimensions (contiguous in memory: one row of the reduction),
    empty when the innermost dimension is kept."""
    run: list[int] = []
    for d in range(ndim - 1, -1, -1):
        if d not in axes:
            break
        run.insert(0, d)
    return run


def row_length(shape: Sequence[int], axes: Sequence[int]) -> int:
    """Elements of one row of the reduction (its trailing reduced dimensions), 0 when the
    innermost dimension is kept."""
    row = row_dims(len(shape), axes)
    return math.prod(shape[d] for d in row) if row else 0


def _full(r: _Reduced, o: Sequence[Any], rvars: Sequence[Any]) -> tuple[Any, ...]:
    if not r.has_kept():          # full reduction to shape (1,): the output index is a dummy
        o = ()
    return r.full_index(o, rvars)


def _reduce(x: te.Tensor, axes: Any, keepdims: bool, combiner: Any, op: str, name: str | None = None,
            value: Any = None, lanes: int = 1) -> tuple[_Reduced, te.Tensor]:
    """The reduction stage; with `lanes` > 1 and the innermost axis reduced, as lane partials
    plus a horizontal reduction (see `lane_partials`)."""
    r = _Reduced(x, axes, keepdims, op)
    val = value or (lambda full: x[full])
    stage = name or op
    if lanes > 1 and row_length(x.shape, r.axes) >= lanes:
        return r, lane_partials(r, combiner, val, lanes, stage)

    def body(*o: Any) -> Expr:
        ks = r.raxes("k")
        return combiner(val(_full(r, o, [k.var for k in ks])), axis=ks)

    return r, te.compute(r.shape, body, name=stage, tag=REDUCE)


def unflatten(index: Expr, shape: Sequence[int]) -> list[Expr]:
    """The row-major indices into `shape` of flat position `index` (no modulo on the first, no
    division on the last)."""
    out: list[Expr] = []
    stride = 1
    for axis in reversed(range(len(shape))):
        q = index // stride if stride > 1 else index
        out.append(q % shape[axis] if axis else q)
        stride *= shape[axis]
    return out[::-1]


def lane_partials(r: _Reduced, combiner: Any, value: Any, lanes: int, name: str) -> te.Tensor:
    """A reduction whose row (its trailing reduced dimensions, flattened: length n) runs as
    `lanes` independent partials.

    part[kept..., l] combines value at row index ko * lanes + l over ko in [0, ceil(n / lanes))
    (masked past n) and the other reduced axes; then out[o] combines the lanes. A layout
    choice, not a change of the math (floats differ by summation order): te has no rfactor, and
    a reduction over a data axis `l` can be vectorized, so each reduce step is one vector
    operation instead of a latency-bound scalar chain. A global average pool's row is its H x W
    plane (49 elements at 7x7: summed one element at a time, it ran 0.78x onnxruntime).
    """
    x = r.x
    row = row_dims(x.ndim, r.axes)
    n = row_length(x.shape, r.axes)
    q = -(-n // lanes)
    kept_shape = tuple(m for d, m in enumerate(x.shape) if d not in r.axes)
    others = [d for d in r.axes if d not in row]

    def part_body(*il: Any) -> Expr:
        *kept, lane = il
        ks = [te.reduce_axis((0, x.shape[d]), name=f"k{d}") for d in others]
        ko = te.reduce_axis((0, q), name="ko")
        inner = ko.var * lanes + lane
        at = dict(zip(row, unflatten(inner, [x.shape[d] for d in row])))
        rv, kv = iter([k.var for k in ks]), iter(kept)
        full = tuple(at[d] if d in at else next(rv) if d in r.axes else next(kv) for d in range(x.ndim))
        where = inner < n if n % lanes else None
        return combiner(value(full), axis=[*ks, ko], where=where)

    part = te.compute((*kept_shape, lanes), part_body, name=f"{name}.lanes", tag=REDUCE)

    def total(*o: Any) -> Expr:
        kl = te.reduce_axis((0, lanes), name="kl")
        kept = [i for d, i in enumerate(o) if d not in r.axes] if r.keepdims else (list(o) if kept_shape else [])
        return combiner(part[(*kept, kl.var)], axis=kl)

    return te.compute(r.shape, total, name=name, tag=REDUCE)


def sum(x: te.Tensor, axes: Any = None, keepdims: bool = False, lanes: int = 1) -> te.Tensor:
    """Sum over `axes` (None: all), in x's dtype."""
    return _reduce(x, axes, keepdims, te.sum, "sum", lanes=lanes)[1]


def max(x: te.Tensor, axes: Any = None, keepdims: bool = False, lanes: int = 1) -> te.Tensor:
    return _reduce(x, axes, keepdims, te.max, "max", lanes=lanes)[1]


def min(x: te.Tensor, axes: Any = None, keepdims: bool = False, lanes: int = 1) -> te.Tensor:
    return _reduce(x, axes, keepdims, te.min, "min", lanes=lanes)[1]


def mean(x: te.Tensor, axes: Any = None, keepdims: bool = False, lanes: int = 1) -> te.Tensor:
    """sum / n (float tensors)."""
    float_only("mean", x)
    r, s = _reduce(x, axes, keepdims, te.sum, "mean", name="mean.sum", lanes=lanes)
    inv = 1.0 / r.count
    return te.compute(r.shape, lambda *o: s[o] * te.const(inv, x.dtype), name="mean", tag="elemwise")


def var(x: te.Tensor, axes: Any = None, keepdims: bool = False, lanes: int = 1) -> te.Tensor:
    """Population variance (numpy's np.var, ddof=0): mean((x - mean(x))^2), two passes."""
    float_only("var", x)
    r, s = _reduce(x, axes, keepdims, te.sum, "var", name="var.sum", lanes=lanes)
    inv = te.const(1.0 / r.count, x.dtype)

    def sq(full: Sequence[Any]) -> Expr:
        d = x[full] - s[r.out_of_full(full)] * inv
        return d * d

    _, ss = _reduce(x, axes, keepdims, te.sum, "var", name="var.sqsum", value=sq, lanes=lanes)
    return te.compute(r.shape, lambda *o: ss[o] * inv, name="var", tag="elemwise")


def _first_index(x: te.Tensor, axes: Any, keepdims: bool, lanes: int, combiner: Any, op: str,
                 stage: str) -> te.Tensor:
    """int32 index of the first element equal to the block's `combiner` (max or min) in the
    row-major flattening of the reduced axes (`lanes` applies to the combine; the index search
    stays one scalar pass)."""
    r, best = _reduce(x, axes, keepdims, combiner, op, name=stage, lanes=lanes)
    strides = [math.prod(x.shape[e] for e in r.axes if e > d) for d in r.axes]

    def first(*o: Any) -> Expr:
        ks = r.raxes("a")
        full = _full(r, o, [k.var for k in ks])
        flat = ks[0].var * strides[0]
        for k, st in zip(ks[1:], strides[1:]):
            flat = flat + k.var * st
        hit = x[full] == best[r.out_of_full(full)]
        return te.min(te.if_then_else(hit, flat, te.const(r.count, "int32")), axis=ks)

    return te.compute(r.shape, first, name=op, tag=REDUCE)


def argmax(x: te.Tensor, axes: Any = None, keepdims: bool = False, lanes: int = 1) -> te.Tensor:
    """int32 index of the first maximum (see `_first_index`)."""
    return _first_index(x, axes, keepdims, lanes, te.max, "argmax", "argmax.max")


def argmin(x: te.Tensor, axes: Any = None, keepdims: bool = False, lanes: int = 1) -> te.Tensor:
    """int32 index of the first minimum (see `_first_index`)."""
    return _first_index(x, axes, keepdims, lanes, te.min, "argmin", "argmin.min")
