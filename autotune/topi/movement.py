"""Data movement as te computes: transpose/permute, pad, border_pad, concat, strided slice,
take/embedding.

All are injective (tag "injective"): each output element reads at most one element of each
input, so the generic injective schedule fuses them with their neighbours. Reads that may fall
outside an input (padding, the other inputs of a concat) sit in if_then_else branches, which
lowering predicates, so they are never performed.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import te
from ..te.expr import Expr

INJECTIVE = "injective"


def normalize_perm(ndim: int, axes: Any, op: str = "transpose") -> tuple[int, ...]:
    """A permutation of range(ndim); None reverses the axes (numpy's default)."""
    if axes is None:
        return tuple(reversed(range(ndim)))
    perm = tuple(a % ndim if isinstance(a, int) and -ndim <= a < ndim else -1 for a in axes)
    if sorted(perm) != list(range(ndim)):
        raise ValueError(f"{op}: axes {tuple(axes)} is not a permutation of the {ndim} axes")
    return perm


def transpose(x: te.Tensor, axes: Any = None) -> te.Tensor:
    """out.shape[d] = x.shape[axes[d]] (numpy's transpose; `permute` in PyTorch)."""
    perm = normalize_perm(x.ndim, axes)
    inverse = [perm.index(d) for d in range(x.ndim)]
    return te.compute(tuple(x.shape[p] for p in perm), lambda *i: x[tuple(i[inverse[d]] for d in range(x.ndim))],
                      name="transpose", tag=INJECTIVE)


permute = transpose


def _padded_shape(op: str, x: te.Tensor, before: tuple[int, ...], after: tuple[int, ...]) -> tuple[int, ...]:
    """x's shape grown by the padding widths, checked: one entry per dimension, none negative."""
    if len(before) != x.ndim or len(after) != x.ndim:
        raise ValueError(f"{op}: pad_before and pad_after need one entry per dimension ({x.ndim}), "
                         f"got {before} and {after}")
    if any(p < 0 for p in before + after):
        raise ValueError(f"{op}: padding must be >= 0, got pad_before={before}, pad_after={after}")
    return tuple(n + b + a for n, b, a in zip(x.shape, before, after))


def pad(x: te.Tensor, pad_before: Sequence[int], pad_after: Sequence[int] | None = None,
        value: float = 0.0, name: str = "pad") -> te.Tensor:
    """Constant padding: pad_before[d] values before and pad_after[d] after dimension d."""
    before = tuple(pad_before)
    after = before if pad_after is None else tuple(pad_after)
    shape = _padded_shape("pad", x, before, after)

    def body(*i: Any) -> Expr:
        inside = [*(i[d] >= before[d] for d in range(x.ndim) if before[d]),
                  *(i[d] < before[d] + n for d, n in enumerate(x.shape) if after[d])]
        src = x[tuple(v - b if b else v for v, b in zip(i, before))]
        return te.if_then_else(te.all(*inside), src, te.const(value, x.dtype)) if inside else src

    return te.compute(shape, body, name=name, tag=INJECTIVE)


BORDER_MODES = ("edge", "reflect", "wrap")


def _border_index(i: Expr, before: int, after: int, n: int, mode: str) -> Expr:
    """The source index of padded position i along an axis of extent n (numpy's np.pad modes):
    edge repeats the end element, reflect mirrors about it (period 2(n - 1)), wrap repeats the
    axis (period n). Pads within one period are selects on i - before, one per side, cheaper per
    element than the general form's modulo (1 x 64 x 56 x 56 reflected by 1 on a Zen 5, 2
    threads: 58 -> 42 us, onnxruntime 36). Their interior is the branch where both conditions
    hold, so loop partition splits the tiles that cross a border off a guard-free interior of
    contiguous loads; an edge tile's source columns are then constants from one scalar, which
    the codegen reads as a span and a shuffle."""
    j = i - before
    zero = te.const(0, "int32")

    def sides(low: Expr, high: Expr) -> Expr:       # the interior is the branch where both hold
        return te.if_then_else(j >= 0, te.if_then_else(j < n, j, high), low)

    if mode == "edge" or n == 1:
        return sides(zero, te.const(n - 1, "int32"))
    period = n if mode == "wrap" else 2 * (n - 1)
    if mode == "wrap" and max(before, after) <= n:
        return sides(j + n, j - n)
    if mode == "reflect" and max(before, after) < n:
        return sides(zero - j, period - j)
    k = j % period
    return k if mode == "wrap" else te.if_then_else(k < n, k, period - k)


def border_pad(x: te.Tensor, pad_before: Sequence[int], pad_after: Sequence[int], mode: str) -> te.Tensor:
    """Padding copied from x itself (`BORDER_MODES`; numpy's np.pad(x, widths, mode)): every
    output element reads one element of x, so there is no branch around the read."""
    if mode not in BORDER_MODES:
        raise ValueError(f"border_pad: mode must be one of {', '.join(BORDER_MODES)}, got {mode!r}")
    before, after = tuple(pad_before), tuple(pad_after)
    shape = _padded_shape("border_pad", x, before, after)
    return te.compute(shape, lambda *i: x[tuple(_border_index(v, b, a, n, mode) if b or a else v
                                                for v, b, a, n in zip(i, before, after, x.shape))],
                      name="border_pad", tag=INJECTIVE)


def concat(tensors: Sequence[te.Tensor], axis: int = 0) -> te.Tensor:
    """The tensors joined along `axis`; every other dimension and the dtype must match."""
    ts = list(tensors)
    if len(ts) < 2:
        raise ValueError(f"concat: needs at least 2 tensors, got {len(ts)}")
    first = ts[0]
    if not -first.ndim <= axis < first.ndim:
        raise ValueError(f"concat: axis {axis} is out of range for {first.ndim}-d tensors")
    axis %= first.ndim
    for k, t in enumerate(ts[1:], 1):
        if t.dtype != first.dtype:
            raise TypeError(f"concat: tensor {k} has dtype {t.dtype}, tensor 0 has {first.dtype}")
        if t.ndim != first.ndim or any(a != b for d, (a, b) in enumerate(zip(t.shape, first.shape)) if d != axis):
            raise ValueError(f"concat: tensor {k} has shape {t.shape}, tensor 0 has {first.shape}; "
                             f"only dimension {axis} may differ")
    offsets = [0]
    for t in ts:
        offsets.append(offsets[-1] + t.shape[axis])
    shape = tuple(offsets[-1] if d == axis else n for d, n in enumerate(first.shape))

    def body(*i: Any) -> Expr:
        def part(k: int) -> Expr:
            return ts[k][tuple(v - offsets[k] if d == axis and offsets[k] else v for d, v in enumerate(i))]

        out = part(len(ts) - 1)
        for k in range(len(ts) - 2, -1, -1):      # the last part is the innermost else-branch
            out = te.if_then_else(i[axis] < offsets[k + 1], part(k), out)
        return out

    return te.compute(shape, body, name="concat", tag=INJECTIVE)


def slice_ranges(shape: Sequence[int], begin: Sequence[int], end: Sequence[int],
                 step: Sequence[int] | None = None, op: str = "slice") -> list[tuple[int, int, int]]:
    """(start, step, length) per dimension of x[begin:end:step] with Python's slice rules."""
    step = (1,) * len(shape) if step is None else tuple(step)
    if not len(begin) == len(end) == len(step) == len(shape):
        raise ValueError(f"{op}: begin, end and step need one entry per dimension ({len(shape)}), "
                         f"got {tuple(begin)}, {tuple(end)}, {step}")
    out = []
    for d, (n, b, e, s) in enumerate(zip(shape, begin, end, step)):
        if s == 0:
            raise ValueError(f"{op}: step of dimension {d} is 0")
        start, stop, st = slice(b, e, s).indices(n)
        length = len(range(start, stop, st))
        if length == 0:
            raise ValueError(f"{op}: dimension {d} of the slice [{b}:{e}:{s}] of extent {n} is empty")
        out.append((start, st, length))
    return out


def strided_slice(x: te.Tensor, begin: Sequence[int], end: Sequence[int],
                  step: Sequence[int] | None = None) -> te.Tensor:
    """x[begin[0]:end[0]:step[0], ...] (negative indices and steps as in Python)."""
    ranges = slice_ranges(x.shape, begin, end, step)
    return te.compute(tuple(n for _, _, n in ranges),
                      lambda *i: x[tuple(b + v * s if s != 1 else b + v for v, (b, s, _) in zip(i, ranges))],
                      name="slice", tag=INJECTIVE)


def first_out_of_range(indices: Any, rows: int) -> int | None:
    """The first of the integer array `indices` outside [-rows, rows), the range `take` gathers
    from (negative indices count back), or None: what callers reject before the kernel clips."""
    if not indices.size or (indices.min() >= -rows and indices.max() < rows):
        return None
    return int(indices[(indices < -rows) | (indices >= rows)].flat[0])


def take(weight: te.Tensor, indices: te.Tensor) -> te.Tensor:
    """out[i..., j...] = weight[indices[i...], j...]: rows of `weight` (axis 0) picked by int32
    `indices`, a negative one counting back from the end (numpy, ONNX Gather). Indices outside
    [-n, n) are clipped to [0, n - 1], so a bad index never reads outside `weight`;
    `autotune.ops.take` and a compiled model's input checks reject them before the call."""
    if indices.dtype != "int32":
        raise TypeError(f"take: indices must be int32, got {indices.dtype}")
    n = weight.shape[0]
    shape = tuple(indices.shape) + tuple(weight.shape[1:])
    k = indices.ndim

    def body(*i: Any) -> Expr:
        index = indices[i[:k]]
        wrapped = te.if_then_else(index < 0, index + n, index)
        row = te.minimum(te.maximum(wrapped, te.const(0, "int32")), te.const(n - 1, "int32"))
        return weight[(row, *i[k:])]

    return te.compute(shape, body, name="take", tag=INJECTIVE)


def embedding(indices: te.Tensor, weight: te.Tensor) -> te.Tensor:
    """PyTorch's F.embedding(indices, weight): take(weight, indices)."""
    return take(weight, indices)
