"""Data movement on the CPU: transpose, pad, border_pad, concat, slice, take, expand; generic
injective schedule.

Shape parameters:
- transpose: `shape`, `axes` (a permutation of the axes).
- pad: `shape`, `pad_before`, `pad_after` (one entry per dimension) and `value`, a float
  (`value=-1.5` on the command line; cast to the dtype, so an int dtype pads with whole values).
- border_pad: `shape`, `pad_before`, `pad_after` and `mode`: edge, reflect or wrap (numpy's modes).
- concat: `shape` (of the result), `axis`, `sizes` (each input's extent along `axis`; they sum
  to shape[axis]; 2 or more inputs).
- slice: `shape`, `begin`, `end`, `step` (Python slice rules per dimension, negative allowed).
- take: `weight_shape`, `indices_shape` (int32 indices into axis 0 of weight; negative ones
  count back from the end, the others out of range are clipped); embedding is take with
  (indices, weight).
- expand: `shape`, `out_shape` (numpy's broadcast_to, materialised: ONNX Expand).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import te
from ...topi import elementwise as topi_elementwise, movement as topi
from ..generic import injective_schedule, schedule_injective
from ..schedule import create_schedule
from ..task import template
from .elementwise import as_shape
from .rules import first, lanes, largest_fitting, worth_threads


def _ints(v: Any, op: str, name: str, n: int | None = None) -> tuple[int, ...]:
    t = (v,) if isinstance(v, int) and not isinstance(v, bool) else tuple(v) if isinstance(v, (tuple, list)) else None
    ok = t is not None and all(isinstance(d, int) and not isinstance(d, bool) for d in t)
    if t is None or not ok or (n is not None and len(t) != n):   # ok implies t is not None
        want = f"{n} ints" if n is not None else "a tuple of ints"
        raise ValueError(f"{op}: parameter {name} must be {want}, got {v!r}")
    return t


def _transpose_reference(x: np.ndarray, axes: Any, **_: Any) -> np.ndarray:
    return np.transpose(x, _ints(axes, "transpose", "axes"))


def schedule_transpose(cfg: Any, s: te.Schedule, y: te.Tensor, perm: tuple[int, ...]) -> None:
    """Tiles of `tile` x `tile` elements: the output axis that reads x's innermost axis and the
    output's innermost axis are split and their tile loops put outside, so every cache line of
    x read by a tile is used whole; the innermost loop is vectorized (strided reads of x) and
    the tile's rows unrolled around it, so that the codegen reads the tile as one transposed
    block, rows and shuffles, not gathers (1001 x 999: 0.43 -> 1.08x onnxruntime; 64 channels
    of 57 x 57 to NHWC: 0.59 -> 1.77x); the tile loops fused and parallel. tile 0: untiled, rows
    in parallel.
    Default: tile = the lanes (each tile row one vector), the largest tile that fits both axes
    when they are shorter, 0 when none does; threads by `rules.worth_threads` on the size."""
    st = s[y]
    axes = list(st.op.axis)
    a = perm.index(len(perm) - 1)                # the output axis along x's contiguous axis
    tiles = [t for t in (0, 8, 16, 32) if t == 0 or t <= min(axes[a].extent, axes[-1].extent)]
    cfg.define_knob("tile", first(largest_fitting(tiles, lambda t: t <= lanes(cfg, y.dtype)), tiles))
    cfg.define_knob("parallel", first(int(worth_threads(cfg, math.prod(y.shape))), [0, 1]))
    tile = cfg["tile"].val
    if tile:
        ao, ai = st.split(axes[a], tile)
        jo, ji = st.split(axes[-1], tile)
        others = [v for k, v in enumerate(axes[:-1]) if k != a]
        st.reorder(*others, ao, jo, ai, ji)
        st.unroll(ai)
        outer = st.fuse(*others, ao, jo)
    else:
        jo, ji = st.split(axes[-1], 16)
        outer = st.fuse(*axes[:-1], jo)
    st.vectorize(ji)
    if cfg["parallel"].val:
        st.parallel(outer)


@template("transpose", reference=_transpose_reference, description="permute the axes of x (numpy's transpose)")
def transpose_template(cfg: Any, shape: Any, axes: Any, dtype: str = "float32"):
    """Contiguous innermost axis: the generic injective schedule; else tiled (`schedule_transpose`).
    Default: the rule of whichever schedule runs."""
    x = te.placeholder(as_shape(shape, "transpose", "shape"), dtype, name="x")
    perm = topi.normalize_perm(len(x.shape), _ints(axes, "transpose", "axes", len(x.shape)))
    y = topi.transpose(x, perm)
    if perm[-1] == len(perm) - 1:
        return injective_schedule(cfg, y), [x, y]
    s = te.create_schedule(y.op)
    schedule_transpose(cfg, s, y, perm)
    return s, [x, y]


def _pad_reference(x: np.ndarray, pad_before: Any, pad_after: Any, value: float, **_: Any) -> np.ndarray:
    widths = list(zip(_ints(pad_before, "pad", "pad_before"), _ints(pad_after, "pad", "pad_after")))
    return np.pad(x, widths, constant_values=np.asarray(value).astype(x.dtype))


@template("pad", reference=_pad_reference, description="constant padding of x, per dimension before/after")
def pad_template(cfg: Any, shape: Any, pad_before: Any, pad_after: Any, value: float, dtype: str = "float32"):
    """Default: the generic injective schedule's rule (vector tile of the lanes, threads by size)."""
    x = te.placeholder(as_shape(shape, "pad", "shape"), dtype, name="x")
    n = len(x.shape)
    y = topi.pad(x, _ints(pad_before, "pad", "pad_before", n), _ints(pad_after, "pad", "pad_after", n), value)
    return injective_schedule(cfg, y), [x, y]


def _border_pad_reference(x: np.ndarray, pad_before: Any, pad_after: Any, mode: str, **_: Any) -> np.ndarray:
    widths = list(zip(_ints(pad_before, "border_pad", "pad_before"), _ints(pad_after, "border_pad", "pad_after")))
    return np.pad(x, widths, mode=mode)  # type: ignore[call-overload]


@template("border_pad", reference=_border_pad_reference,
          description="padding copied from x's border: edge, reflect or wrap (numpy's np.pad modes)")
def border_pad_template(cfg: Any, shape: Any, pad_before: Any, pad_after: Any, mode: str, dtype: str = "float32"):
    """Default: the generic injective schedule's rule (vector tile of the lanes, threads by size)."""
    x = te.placeholder(as_shape(shape, "border_pad", "shape"), dtype, name="x")
    n = len(x.shape)
    y = topi.border_pad(x, _ints(pad_before, "border_pad", "pad_before", n),
                        _ints(pad_after, "border_pad", "pad_after", n), mode)
    return injective_schedule(cfg, y), [x, y]


def _concat_reference(*arrays: np.ndarray, axis: int, **_: Any) -> np.ndarray:
    return np.concatenate(arrays, axis=axis)


def concat_input_shapes(shape: Any, axis: Any, sizes: Any) -> list[tuple[int, ...]]:
    """The inputs' shapes of a concat task; errors name the parameter."""
    out = as_shape(shape, "concat", "shape")
    if not isinstance(axis, int) or not -len(out) <= axis < len(out):
        raise ValueError(f"concat: parameter axis must be an int in [{-len(out)}, {len(out)}), got {axis!r}")
    parts = _ints(sizes, "concat", "sizes")
    if len(parts) < 2 or min(parts) < 1 or sum(parts) != out[axis]:
        raise ValueError(f"concat: parameter sizes must be 2 or more positive extents summing to shape[{axis}] = "
                         f"{out[axis]}, got {parts}")
    ax = axis % len(out)
    return [tuple(p if d == ax else n for d, n in enumerate(out)) for p in parts]


@template("concat", reference=_concat_reference, description="join len(sizes) tensors along axis")
def concat_template(cfg: Any, shape: Any, axis: int, sizes: Any, dtype: str = "float32"):
    """Each input's part is a contiguous block per index of the axes before `axis`: the axes
    after it are read at the same offsets in the result and in every input, so they run fused,
    as one vector loop over the whole block with a tail only at its end (rows of 57 floats paid
    a masked vector in four). Then the generic injective schedule; its default rule (vector
    tile of the lanes, threads by size) applies to that flat axis."""
    xs = [te.placeholder(sh, dtype, name=f"x{k}") for k, sh in enumerate(concat_input_shapes(shape, axis, sizes))]
    y = topi.concat(xs, axis)
    s = create_schedule(y)
    axes = list(s[y].op.axis)
    cut = axis % len(axes) + 1
    if len(axes) - cut >= 2:
        axes[cut:] = [s[y].fuse(*axes[cut:])]
    schedule_injective(cfg, s, y, axes=axes)
    return s, [*xs, y]


def _slice_reference(x: np.ndarray, begin: Any, end: Any, step: Any, **_: Any) -> np.ndarray:
    return x[tuple(slice(b, e, s) for b, e, s in zip(_ints(begin, "slice", "begin"), _ints(end, "slice", "end"),
                                                       _ints(step, "slice", "step")))].copy()


@template("slice", reference=_slice_reference, description="x[begin:end:step] per dimension (Python rules)")
def slice_template(cfg: Any, shape: Any, begin: Any, end: Any, step: Any, dtype: str = "float32"):
    """Default: the generic injective schedule's rule (vector tile of the lanes, threads by size)."""
    x = te.placeholder(as_shape(shape, "slice", "shape"), dtype, name="x")
    n = len(x.shape)
    y = topi.strided_slice(x, _ints(begin, "slice", "begin", n), _ints(end, "slice", "end", n),
                           _ints(step, "slice", "step", n))
    return injective_schedule(cfg, y), [x, y]


def _take_reference(weight: np.ndarray, indices: np.ndarray, **_: Any) -> np.ndarray:
    wrapped = np.where(indices < 0, indices + weight.shape[0], indices)
    return np.take(weight, wrapped, axis=0, mode="clip")


@template("take", reference=_take_reference,
          description="rows of weight picked by int32 indices (embedding lookup), out-of-range clipped")
def take_template(cfg: Any, weight_shape: Any, indices_shape: Any, dtype: str = "float32"):
    """Default: the generic injective schedule's rule (vector tile of the lanes, threads by size)."""
    w = te.placeholder(as_shape(weight_shape, "take", "weight_shape"), dtype, name="weight")
    idx = te.placeholder(as_shape(indices_shape, "take", "indices_shape"), "int32", name="indices")
    y = topi.take(w, idx)
    return injective_schedule(cfg, y), [w, idx, y]


@template("expand", reference=lambda x, out_shape, **_: np.broadcast_to(x, out_shape).copy(),
          description="numpy broadcast_to(x, out_shape), materialised (ONNX Expand)")
def expand_template(cfg: Any, shape: Any, out_shape: Any, dtype: str = "float32"):
    """Default: the generic injective schedule's rule (vector tile of the lanes, threads by size)."""
    x = te.placeholder(as_shape(shape, "expand", "shape"), dtype, name="x")
    y = topi_elementwise.expand(x, as_shape(out_shape, "expand", "out_shape"))
    return injective_schedule(cfg, y), [x, y]
