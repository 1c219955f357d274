"""ONNX data-movement ops -> views (no kernel) or the movement templates.

Reshape, Flatten, Squeeze, Unsqueeze, Identity and Dropout only rename a contiguous tensor's
shape: shape inference already resolved Reshape's 0 / -1 / allowzero, so each is a view to the
inferred output shape. Transpose, Concat, Split, Slice, Gather, Expand and Pad move data.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..graph.ir import TrainingGuard
from .builder import Attrs, Builder, allowed, converts
from .onnx_ops import f32, like

MAX_FLOAT32 = float(np.finfo(np.float32).max)


@converts("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
def _view(b: Builder, node: Any, attrs: Attrs) -> None:
    b.view(node.input[0], b.out_shape(), b.out())


@converts("Dropout")
def _dropout(b: Builder, node: Any, attrs: Attrs) -> None:
    """Inference: the identity, and a mask of all True when the model asks for it. Training
    (training_mode true, ratio not 0) drops at random, which autotune does not do: constant, it
    is unsupported; taken from the model's inputs, each call checks it (`TrainingGuard`)."""
    training: str | bool = node.input[2] if len(node.input) > 2 and node.input[2] else False
    ratio: str | float = node.input[1] if len(node.input) > 1 and node.input[1] else 0.5
    training, ratio = _scalar(b, training, bool), _scalar(b, ratio, float)
    if training is True and not isinstance(ratio, str) and ratio != 0:
        raise b.fail(f"training_mode is true with ratio {ratio}: training-mode Dropout (random drops) is not supported")
    if training is not False and ratio != 0:        # an input decides: checked at each call
        b.guards.append(TrainingGuard(b.node_name, training, ratio))
    b.view(node.input[0], b.out_shape(), b.out())
    if len(node.output) > 1 and node.output[1]:
        b.constants[node.output[1]] = np.ones(b.out_shape(1), dtype=bool)


def _scalar(b: Builder, value: Any, kind: type) -> Any:
    """A Dropout input as its constant value, or its name when it is a model input."""
    if not isinstance(value, str):
        return value
    if value in b.constants:
        return kind(b.constants[value])
    if value in b.model_inputs:
        return value
    raise b.fail(f"input {value!r} must be a constant or a model input")


@converts("Transpose")
def _transpose(b: Builder, node: Any, attrs: Attrs) -> None:
    rank = len(b.shape(node.input[0]))
    b.transpose(node.input[0], attrs.get("perm", list(reversed(range(rank)))), out=b.out())


@converts("Concat")
def _concat(b: Builder, node: Any, attrs: Attrs) -> None:
    shape = b.out_shape()
    axis = attrs["axis"] % len(shape)
    xs = [x for x in node.input if b.shape(x)[axis] > 0]
    if len(xs) == 1:
        b.view(xs[0], shape, b.out())
        return
    params = {"shape": shape, "axis": axis, "sizes": tuple(b.shape(x)[axis] for x in xs)}
    b.kernel("concat", xs, params, shape, out=b.out())


def slice_node(b: Builder, x: str, begin: list[int], end: list[int], step: list[int], out: str | None,
               shape: tuple[int, ...]) -> str:
    """x[begin:end:step] (Python rules), or a view when that is all of x."""
    if shape == b.shape(x) and all(s == 1 for s in step):
        return b.view(x, shape, out)
    params = {"shape": b.shape(x), "begin": tuple(begin), "end": tuple(end), "step": tuple(step)}
    return b.kernel("slice", [x], params, shape, out=out)


@converts("Split")
def _split(b: Builder, node: Any, attrs: Attrs) -> None:
    """One slice per output; the parts' sizes are the outputs' inferred extents."""
    x = node.input[0]
    shape = b.shape(x)
    axis = attrs.get("axis", 0) % len(shape)
    start = 0
    for k, out in enumerate(node.output):
        size = b.out_shape(k)[axis]
        begin = [start if d == axis else 0 for d in range(len(shape))]
        end = [start + size if d == axis else n for d, n in enumerate(shape)]
        if out:
            slice_node(b, x, begin, end, [1] * len(shape), out, b.out_shape(k))
        start += size


def _slice_bounds(start: int, end: int, step: int, n: int) -> tuple[int, int]:
    """ONNX Slice's clamping of (start, end) on an axis of extent n, as Python slice bounds."""
    start, end = start + n if start < 0 else start, end + n if end < 0 else end
    if step > 0:
        return min(max(start, 0), n), min(max(end, 0), n)
    start, end = min(max(start, 0), n - 1), min(max(end, -1), n - 1)
    return start, -(n + 1) if end < 0 else end


@converts("Slice")
def _slice(b: Builder, node: Any, attrs: Attrs) -> None:
    x = node.input[0]
    shape = b.shape(x)
    starts = b.need_const(node.input[1], "starts")
    ends = b.need_const(node.input[2], "ends")
    extra = [b.const(i) if i else None for i in (list(node.input[3:5]) + ["", ""])[:2]]
    axes = extra[0] if extra[0] is not None else np.arange(len(starts))
    steps = extra[1] if extra[1] is not None else np.ones(len(starts), dtype=np.int64)
    if any(i and b.const(i) is None for i in node.input[3:5]):
        raise b.fail("axes and steps must be constants")
    begin, end, step = [0] * len(shape), list(shape), [1] * len(shape)
    for s, e, a, st in zip(starts.tolist(), ends.tolist(), axes.tolist(), steps.tolist()):
        a %= len(shape)
        begin[a], end[a] = _slice_bounds(int(s), int(e), int(st), shape[a])
        step[a] = int(st)
    slice_node(b, x, begin, end, step, b.out(), b.out_shape())


@converts("Gather")
def _gather(b: Builder, node: Any, attrs: Attrs) -> None:
    """A constant scalar index is a slice and a view; otherwise `take` (rows of axis 0) with
    the gathered axis transposed to the front and back."""
    data, idx = node.input
    shape = b.shape(data)
    axis = attrs.get("axis", 0) % len(shape)
    array = b.const(idx)
    if array is not None:
        array = np.where(array < 0, array + shape[axis], array)
        if array.ndim == 0:
            begin = [int(array) if d == axis else 0 for d in range(len(shape))]
            end = [int(array) + 1 if d == axis else n for d, n in enumerate(shape)]
            kept = tuple(1 if d == axis else n for d, n in enumerate(shape))
            b.view(slice_node(b, data, begin, end, [1] * len(shape), None, kept), b.out_shape(), b.out())
            return
        idx = b.constant(array.astype(np.int32), "indices")
    idx = b.operand(like(b, idx, "int32"))
    front = b.transpose(data, [axis] + [d for d in range(len(shape)) if d != axis])
    rest = b.shape(front)[1:]
    taken_shape = b.shape(idx) + rest
    taken = b.kernel("take", [front, idx], {"weight_shape": b.shape(front), "indices_shape": b.shape(idx)},
                     taken_shape, b.dtype(data))
    k = len(b.shape(idx))
    back = [k + d for d in range(axis)] + list(range(k)) + [k + d for d in range(axis, len(rest))]
    moved = b.transpose(taken, back)
    b.view(moved, b.out_shape(), b.out())


@converts("Expand")
def _expand(b: Builder, node: Any, attrs: Attrs) -> None:
    x, shape = node.input[0], b.out_shape()
    if b.shape(x) == shape:
        b.view(x, shape, b.out())
        return
    x = b.operand(x)
    b.kernel("expand", [x], {"shape": b.shape(x), "out_shape": shape}, shape, out=b.out())


@converts("Tile")
def _tile(b: Builder, node: Any, attrs: Attrs) -> None:
    """x (d0, d1, ...) viewed as (1, d0, 1, d1, ...), expanded to (r0, d0, r1, d1, ...) and viewed
    as the output: one expand kernel."""
    x, shape = node.input[0], b.shape(node.input[0])
    repeats = [int(r) for r in b.need_const(node.input[1], "repeats").tolist()]
    spread = tuple(v for d in shape for v in (1, d))
    expanded = tuple(v for r, d in zip(repeats, shape) for v in (r, d))
    if spread == expanded:
        b.view(x, b.out_shape(), b.out())
        return
    x = b.view(x, spread)
    b.view(b.kernel("expand", [x], {"shape": spread, "out_shape": expanded}, expanded), b.out_shape(), b.out())


def _depth_mode_check(node: Any, attrs: Attrs) -> list[str]:
    return allowed(node, attrs, "mode", ("DCR", "CRD"), "DCR")


@converts("DepthToSpace", check=_depth_mode_check)
def _depth_to_space(b: Builder, node: Any, attrs: Attrs) -> None:
    """(N, C, H, W) -> (N, C / s^2, H s, W s): a 6-d view, one transpose, a view. DCR takes the
    depth as (s, s, C'), CRD as (C', s, s)."""
    x, s = node.input[0], int(attrs["blocksize"])
    N, C, H, W = b.shape(x)
    if attrs.get("mode", "DCR") == "DCR":
        blocks, perm = (N, s, s, C // (s * s), H, W), (0, 3, 4, 1, 5, 2)
    else:
        blocks, perm = (N, C // (s * s), s, s, H, W), (0, 1, 4, 2, 5, 3)
    b.view(b.transpose(b.view(x, blocks), perm), b.out_shape(), b.out())


@converts("SpaceToDepth")
def _space_to_depth(b: Builder, node: Any, attrs: Attrs) -> None:
    """(N, C, H, W) -> (N, C s^2, H / s, W / s), the depth taken as (s, s, C)."""
    x, s = node.input[0], int(attrs["blocksize"])
    N, C, H, W = b.shape(x)
    blocks = b.view(x, (N, C, H // s, s, W // s, s))
    b.view(b.transpose(blocks, (0, 3, 5, 1, 2, 4)), b.out_shape(), b.out())


def _pad_check(node: Any, attrs: Attrs) -> list[str]:
    return allowed(node, attrs, "mode", ("constant", "edge", "reflect", "wrap"), "constant")


@converts("Pad", check=_pad_check)
def _pad(b: Builder, node: Any, attrs: Attrs) -> None:
    """`pad` with the constant, or `border_pad` for the edge / reflect / wrap modes."""
    x = node.input[0]
    rank = len(b.shape(x))
    pads = b.need_const(node.input[1], "pads").tolist()
    value = b.const(node.input[2]) if len(node.input) > 2 and node.input[2] else np.zeros(())
    if value is None:
        raise b.fail("constant_value must be a constant")
    axes = b.need_const(node.input[3], "axes").tolist() if len(node.input) > 3 and node.input[3] else range(rank)
    before, after = [0] * rank, [0] * rank
    for k, a in enumerate(axes):
        before[a % rank], after[a % rank] = int(pads[k]), int(pads[k + len(axes)])
    if min(before + after) < 0:
        raise b.fail(f"negative pads {pads} are not supported")
    if max(before + after) == 0:
        b.view(x, b.out_shape(), b.out())
        return
    mode = attrs.get("mode", "constant")
    if mode != "constant":
        params = {"shape": b.shape(x), "pad_before": tuple(before), "pad_after": tuple(after), "mode": mode}
        b.kernel("border_pad", [x], params, b.out_shape(), out=b.out())
        return
    fill = f32(value.item()) if b.dtype(x).startswith("float") else float(value.item())
    params = {"shape": b.shape(x), "pad_before": tuple(before), "pad_after": tuple(after), "value": fill}
    b.kernel("pad", [x], params, b.out_shape(), out=b.out())
