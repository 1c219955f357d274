"""The te computation of a graph node, from the computes the templates use (`autotune.topi`), so
that a fusion group can be written as one te computation (`fused_task`).

`COMPUTES` maps each op whose compute composes (pointwise ops, the row reductions and
normalisations) to a function `(node, input tensors) -> output tensor`; an op missing from it
runs as its own template kernel. `reshape` is a view node's compute; `inline_at` writes a chain
of pointwise computes as one expression (what an anchor's epilogue must be).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from .. import te
from ..schedules.cpu.elementwise import BINARY, UNARY
from ..schedules.cpu.logic import COMPARISONS
from ..schedules.cpu.reduction import default_lanes
from ..te.expr import Expr, TensorLoad
from ..te.tensor import ComputeOp, Tensor
from ..te.traversal import substitute, transform
from ..topi import elementwise as ew, movement, nn, reduction
from .ir import Node

Compute = Callable[[Node, list[Tensor]], Tensor]


def _unary(f: Callable[[Tensor], Tensor]) -> Compute:
    return lambda node, xs: f(xs[0])


def _binary(f: Callable[[Tensor, Tensor], Tensor]) -> Compute:
    return lambda node, xs: f(xs[0], xs[1])


def _reduce(f: Callable[..., Tensor]) -> Compute:
    """The reduction with the lane partials the op's own template defaults to (`default_lanes`):
    a fused sum of squares over 1000 rows of 1001 (ReduceL2) ran a serial sum per row, 15x
    slower than the unfused mean of the same rows."""
    def compute(node: Node, xs: list[Tensor]) -> Tensor:
        axes, x = node.params["axes"], xs[0]
        partials = default_lanes(None, x.shape, axes, node.op, x.dtype)
        return f(x, axes, bool(node.params["keepdims"]), lanes=partials)

    return compute


COMPUTES: dict[str, Compute] = {
    **{op: _unary(f) for op, (f, _, _) in UNARY.items()},
    **{op: _binary(f) for op, (f, _) in BINARY.items()},
    **{op: _binary(f) for op, (f, _) in COMPARISONS.items()},
    "where": lambda node, xs: ew.where(xs[0], xs[1], xs[2]),
    "leaky_relu": lambda node, xs: ew.leaky_relu(xs[0], node.params["alpha"]),
    "elu": lambda node, xs: ew.elu(xs[0], node.params["alpha"]),
    "hard_sigmoid": lambda node, xs: ew.hard_sigmoid(xs[0], node.params["alpha"], node.params["beta"]),
    "clip": lambda node, xs: ew.clip(xs[0], node.params["lo"], node.params["hi"]),
    "cast": lambda node, xs: ew.cast(xs[0], node.params["to"]),
    "batch_norm": lambda node, xs: nn.batch_norm(xs[0], xs[1], xs[2], xs[3], xs[4], node.params.get("eps", 1e-5)),
    "softmax": lambda node, xs: nn.softmax(xs[0]),
    "log_softmax": lambda node, xs: nn.log_softmax(xs[0]),
    "layer_norm": lambda node, xs: nn.layer_norm(xs[0], xs[1], xs[2], node.params.get("eps", 1e-5)),
    "rms_norm": lambda node, xs: nn.rms_norm(xs[0], xs[1], node.params.get("eps", 1e-6)),
    "transpose": lambda node, xs: movement.transpose(xs[0], node.params["axes"]),
    "expand": lambda node, xs: ew.expand(xs[0], node.params["out_shape"]),
    "sum": _reduce(reduction.sum), "mean": _reduce(reduction.mean),
    "max": _reduce(reduction.max), "min": _reduce(reduction.min),
}


def reshape(x: Tensor, shape: tuple[int, ...], name: str = "view") -> Tensor:
    """x read in row-major order as `shape` (a view node: the same elements, another shape).
    Trailing axes the two shapes share map one to one (a vector loop along them stays a
    contiguous load); only the leading ones are flattened and split again."""
    if math.prod(shape) != math.prod(x.shape):
        raise ValueError(f"reshape of {x.name}{list(x.shape)} to {list(shape)} changes the element count")
    if tuple(x.shape) == tuple(shape):
        return x
    k = 0
    while k < min(len(shape), x.ndim) - 1 and shape[-1 - k] == x.shape[-1 - k]:
        k += 1
    lead_out, lead_in = shape[:len(shape) - k], x.shape[:x.ndim - k]

    def body(*idx: Any) -> Expr:
        flat: Any = 0 if not lead_out else None      # a rank-0 view reads the one element
        for i, n in zip(idx, lead_out):
            flat = i if flat is None else flat * n + i
        out = []
        for n in reversed(lead_in):
            out.append(flat % n if n > 1 else 0)
            flat = flat // n
        return x[(*reversed(out), *idx[len(lead_out):])]

    return te.compute(tuple(shape), body, name=name)


class NotPointwise(ValueError):
    """The chain cannot be one expression at the output's index (it reduces, or reads the
    anchor's output at another index): the group is not an epilogue."""


def inline_at(t: Tensor, idx: Sequence[Any], keep: Callable[[Tensor], bool]) -> Expr:
    """t[idx] as one expression: every compute read is replaced by its body at the read's indices,
    down to placeholders and the tensors `keep` says to leave as loads."""
    op = t.op
    if keep(t) or not isinstance(op, ComputeOp):
        return t[tuple(idx)]
    if op.reduce_axis:
        raise NotPointwise(f"{op.name} reduces; an epilogue is pointwise")
    body = substitute(op.body, {iv.var: i for iv, i in zip(op.axis, idx)})

    def load(n: Any) -> Expr | None:
        if isinstance(n, TensorLoad) and isinstance(n.tensor, Tensor):
            return inline_at(n.tensor, n.indices, keep) if not keep(n.tensor) else None
        return None

    return transform(body, load)
