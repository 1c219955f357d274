"""Data movement: transpose/permute, pad, concat, slice, take/embedding (numpy's conventions).

Every op checks its arguments and names the op and the argument in its errors, then runs the
best known kernel (`autotune.load`). take/embedding reject out-of-range indices here (the
kernel clips them, so it can never read outside the weight).
"""
from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..runtime import load
from ..topi.movement import BORDER_MODES, first_out_of_range, normalize_perm, slice_ranges
from .checks import arrays as checked_arrays, contiguous


def _nonempty(op: str, x: np.ndarray, name: str = "x") -> None:
    if x.ndim == 0:
        raise ValueError(f"{op}: argument {name} is a 0-d array; expected at least 1 dimension")
    if x.size == 0:
        raise ValueError(f"{op}: argument {name} is empty (shape {x.shape})")


def transpose(x: np.ndarray, axes: Sequence[int] | None = None, db: Any = None) -> np.ndarray:
    """x with its axes permuted (numpy's transpose; None reverses them)."""
    dtype = checked_arrays("transpose", ("x",), (x,), (None,))
    _nonempty("transpose", x)
    if axes is not None and (not isinstance(axes, (tuple, list)) or not all(isinstance(a, int) for a in axes)):
        raise TypeError(f"transpose: argument axes must be a tuple of ints, got {axes!r}")
    perm = normalize_perm(x.ndim, axes)
    kernel = load("transpose", db=db, dtype=dtype, shape=x.shape, axes=perm)
    return kernel(np.ascontiguousarray(x))


def permute(x: np.ndarray, axes: Sequence[int], db: Any = None) -> np.ndarray:
    """PyTorch's name for transpose with an explicit permutation."""
    return transpose(x, axes, db=db)


def _pad_widths(x: np.ndarray, pad_width: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """numpy's pad_width forms: n, (before, after), or ((before, after), ...) per dimension."""
    w = np.asarray(pad_width, dtype=object)
    try:
        full = np.broadcast_to(w, (x.ndim, 2)) if w.ndim <= 2 else None
    except ValueError:
        full = None
    if full is None or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in full.flat):
        raise ValueError(f"pad: argument pad_width must be an int, a (before, after) pair or one pair per "
                         f"dimension ({x.ndim}), got {pad_width!r}")
    if any(v < 0 for v in full.flat):
        raise ValueError(f"pad: argument pad_width must be >= 0, got {pad_width!r}")
    return tuple(int(v) for v in full[:, 0]), tuple(int(v) for v in full[:, 1])


def pad(x: np.ndarray, pad_width: Any, value: float = 0.0, mode: str = "constant", db: Any = None) -> np.ndarray:
    """numpy's np.pad(x, pad_width, mode): "constant" pads with `value`; "edge", "reflect" and
    "wrap" copy x's own border (the `border_pad` template)."""
    dtype = checked_arrays("pad", ("x",), (x,), (None,))
    _nonempty("pad", x)
    before, after = _pad_widths(x, pad_width)
    if mode != "constant":
        if mode not in BORDER_MODES:
            raise ValueError(f"pad: argument mode must be one of constant, {', '.join(BORDER_MODES)}, got {mode!r}")
        if value != 0.0:
            raise ValueError(f"pad: argument value is for mode='constant', got value={value!r} with mode={mode!r}")
        kernel = load("border_pad", db=db, dtype=dtype, shape=x.shape, pad_before=before, pad_after=after, mode=mode)
        return kernel(np.ascontiguousarray(x))
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"pad: argument value must be a number, got {value!r}")
    if np.dtype(dtype).kind != "f" and not float(value).is_integer():
        raise TypeError(f"pad: argument value {value} is not representable in x's dtype {dtype}")
    kernel = load("pad", db=db, dtype=dtype, shape=x.shape, pad_before=before, pad_after=after,
                  value=float(value))
    return kernel(np.ascontiguousarray(x))


def concat(tensors: Sequence[np.ndarray], axis: int = 0, db: Any = None) -> np.ndarray:
    """The arrays joined along `axis` (np.concatenate); 2 or more arrays of one dtype."""
    if not isinstance(tensors, (list, tuple)) or len(tensors) < 2:
        raise ValueError(f"concat: argument tensors must be a list of 2 or more arrays, got "
                         f"{len(tensors) if isinstance(tensors, (list, tuple)) else type(tensors).__name__}")
    names = tuple(f"tensors[{k}]" for k in range(len(tensors)))
    dtype = checked_arrays("concat", names, tuple(tensors), (None,) * len(tensors))
    first = tensors[0]
    _nonempty("concat", first, names[0])
    if not isinstance(axis, int) or not -first.ndim <= axis < first.ndim:
        raise ValueError(f"concat: argument axis {axis!r} is out of range for {first.ndim}-d arrays")
    ax = axis % first.ndim
    for name, t in zip(names[1:], tensors[1:]):
        _nonempty("concat", t, name)
        if t.ndim != first.ndim or any(a != b for d, (a, b) in enumerate(zip(t.shape, first.shape)) if d != ax):
            raise ValueError(f"concat: {name} has shape {t.shape} but tensors[0] has {first.shape}; "
                             f"only dimension {ax} may differ")
    sizes = tuple(t.shape[ax] for t in tensors)
    shape = tuple(sum(sizes) if d == ax else n for d, n in enumerate(first.shape))
    kernel = load("concat", db=db, dtype=dtype, shape=shape, axis=ax, sizes=sizes)
    return kernel(*contiguous(*tensors))


def _slice_params(x: np.ndarray, begin: Any, end: Any, step: Any) -> tuple[tuple[int, ...], ...]:
    """begin/end/step with None filled in (Python's slice rules), as ints a task can hold."""
    n = x.ndim
    step = (1,) * n if step is None else tuple(step)
    begin, end = tuple(begin), tuple(end)
    if not len(begin) == len(end) == len(step) == n:
        raise ValueError(f"slice: arguments begin, end and step need one entry per dimension of x ({n}), got "
                         f"{begin}, {end}, {step}")
    for name, vals in (("begin", begin), ("end", end), ("step", step)):
        if not all(v is None or (isinstance(v, numbers.Integral) and not isinstance(v, bool)) for v in vals):
            raise TypeError(f"slice: argument {name} must hold ints or None, got {vals}")
    st = tuple(1 if s is None else int(s) for s in step)
    if 0 in st:
        raise ValueError(f"slice: argument step must not be 0, got {step}")
    b = tuple((0 if s > 0 else d - 1) if v is None else int(v) for v, s, d in zip(begin, st, x.shape))
    e = tuple((d if s > 0 else -d - 1) if v is None else int(v) for v, s, d in zip(end, st, x.shape))
    return b, e, st


def slice(x: np.ndarray, begin: Sequence[int | None], end: Sequence[int | None],
          step: Sequence[int | None] | None = None, db: Any = None) -> np.ndarray:
    """x[begin[0]:end[0]:step[0], ...] as a new array (Python slice rules, negatives included)."""
    dtype = checked_arrays("slice", ("x",), (x,), (None,))
    _nonempty("slice", x)
    b, e, st = _slice_params(x, begin, end, step)
    slice_ranges(x.shape, b, e, st)              # an empty result is an error, named here
    kernel = load("slice", db=db, dtype=dtype, shape=x.shape, begin=b, end=e, step=st)
    return kernel(np.ascontiguousarray(x))


def take(weight: np.ndarray, indices: Any, db: Any = None) -> np.ndarray:
    """weight[indices]: rows of weight (axis 0) picked by integer indices (negative count back)."""
    dtype = checked_arrays("take", ("weight",), (weight,), (None,))
    _nonempty("take", weight, "weight")
    idx = np.asarray(indices)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"take: argument indices must be an integer array, got {idx.dtype}")
    n = weight.shape[0]
    bad = first_out_of_range(idx, n)
    if bad is not None:
        raise ValueError(f"take: argument indices holds {bad}, out of range for weight's {n} rows")
    if idx.size == 0:
        return np.empty(idx.shape + weight.shape[1:], weight.dtype)
    flat = idx.astype(np.int32).reshape(idx.shape or (1,))       # the kernel counts negatives back
    kernel = load("take", db=db, dtype=dtype, weight_shape=weight.shape, indices_shape=flat.shape)
    out = kernel(np.ascontiguousarray(weight), np.ascontiguousarray(flat))
    return out.reshape(idx.shape + weight.shape[1:])


def embedding(indices: Any, weight: np.ndarray, db: Any = None) -> np.ndarray:
    """PyTorch's F.embedding(indices, weight): weight[indices]."""
    return take(weight, indices, db=db)


def expand(x: np.ndarray, shape: Sequence[int], db: Any = None) -> np.ndarray:
    """numpy's broadcast_to(x, shape) as a new array (ONNX Expand with its shape resolved)."""
    dtype = checked_arrays("expand", ("x",), (x,), (None,))
    if not isinstance(shape, (tuple, list)) or not all(isinstance(d, numbers.Integral) and int(d) >= 0
                                                       and not isinstance(d, bool) for d in shape):
        raise TypeError(f"expand: argument shape must be a tuple of ints >= 0, got {shape!r}")
    out = tuple(int(d) for d in shape)
    try:
        fits = np.broadcast_shapes(x.shape, out) == out
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"expand: x of shape {x.shape} does not broadcast to shape {out}")
    if 0 in out or not out:
        return np.broadcast_to(x, out).copy()
    src = x.reshape(x.shape or (1,))
    kernel = load("expand", db=db, dtype=dtype, shape=src.shape, out_shape=out)
    return kernel(np.ascontiguousarray(src))
