"""A vector index as one scalar plus constant lane offsets.

Lane i of `x16(b) + ramp(-28, 56, 16) // x16(112)` (a 2x linear resize's source column) is b plus
a constant that no variable changes. Such an index reads elements within a few vectors of each
other, which the codegen loads as one contiguous span and a shuffle rather than a gather of 16
scalar loads. `lane_offsets` finds that form through the index arithmetic the lowering writes:
broadcasts, ramps of constant stride, sums, differences, products by a constant, and any
subexpression of constants alone (evaluated lane by lane, floor division included).

Where no such period exists, `rising_spread` bounds how far apart the lanes of an index that never
falls from one lane to the next can be: within a vector, the codegen reads them as one window of
the buffer and a permute.
"""
from __future__ import annotations

import itertools
import operator
from collections.abc import Callable

from ..te.expr import Binary, BinOp, CmpOp, Compare, Const, Expr, Select
from .nodes import Broadcast, Ramp

_FOLD: dict[BinOp, Callable[[int, int], int]] = {
    BinOp.ADD: operator.add, BinOp.SUB: operator.sub, BinOp.MUL: operator.mul,
    BinOp.FLOORDIV: operator.floordiv, BinOp.FLOORMOD: operator.mod, BinOp.MIN: min, BinOp.MAX: max,
}
_COMPARE: dict[CmpOp, Callable[[int, int], bool]] = {
    CmpOp.LT: operator.lt, CmpOp.LE: operator.le, CmpOp.GT: operator.gt,
    CmpOp.GE: operator.ge, CmpOp.EQ: operator.eq, CmpOp.NE: operator.ne,
}


def constant_lanes(e: Expr) -> list[int] | None:
    """Each lane's value of an integer expression of constants alone (one for a scalar), else None."""
    if type(e) is Const:
        return [e.value] if isinstance(e.value, int) and not isinstance(e.value, bool) else None
    if type(e) is Broadcast:
        value = constant_lanes(e.value)
        return None if value is None else value * e.lanes
    if type(e) is Ramp:
        base, stride = constant_lanes(e.base), constant_lanes(e.stride)
        return None if base is None or stride is None else [base[0] + i * stride[0] for i in range(e.lanes)]
    if type(e) is Compare:
        a, b = constant_lanes(e.a), constant_lanes(e.b)
        return None if a is None or b is None else [int(_COMPARE[e.op](x, y)) for x, y in zip(a, b)]
    if type(e) is Select:
        cond, a, b = constant_lanes(e.cond), constant_lanes(e.t), constant_lanes(e.f)
        return None if cond is None or a is None or b is None else [x if c else y for c, x, y in zip(cond, a, b)]
    if type(e) is Binary and e.op in _FOLD:
        a, b = constant_lanes(e.a), constant_lanes(e.b)
        if a is None or b is None or (e.op in (BinOp.FLOORDIV, BinOp.FLOORMOD) and 0 in b):
            return None
        return [_FOLD[e.op](x, y) for x, y in zip(a, b)]
    return None


def lane_offsets(e: Expr) -> tuple[Expr | None, list[int]] | None:
    """(base, offsets): lane i of the vector `e` is base + offsets[i] (base None: 0), or None
    when `e` is not of that form."""
    lanes = constant_lanes(e)
    if lanes is not None:
        return None, lanes
    if type(e) is Broadcast:
        return e.value, [0] * e.lanes
    if type(e) is Ramp and type(e.stride) is Const and isinstance(e.stride.value, int):
        return e.base, [i * e.stride.value for i in range(e.lanes)]
    if type(e) is not Binary or e.lanes == 1:
        return None
    if e.op is BinOp.MUL:
        for vec, other in ((e.a, e.b), (e.b, e.a)):
            k = _uniform(other)
            if k is not None and (split := lane_offsets(vec)) is not None:
                base, offsets = split
                return (None if base is None else Binary(BinOp.MUL, base, Const(k, base.dtype)),
                        [o * k for o in offsets])
        return None
    if e.op not in (BinOp.ADD, BinOp.SUB):
        return None
    left, right = lane_offsets(e.a), lane_offsets(e.b)
    if left is None or right is None:
        return None
    sign = 1 if e.op is BinOp.ADD else -1
    return _combine(left[0], right[0], e.op), [a + sign * b for a, b in zip(left[1], right[1])]


def _combine(a: Expr | None, b: Expr | None, op: BinOp) -> Expr | None:
    if b is None:
        return a
    if a is None:
        return b if op is BinOp.ADD else Binary(BinOp.SUB, Const(0, b.dtype), b)
    return Binary(op, a, b)


def rising_spread(e: Expr) -> int | None:
    """A bound on (last lane - first lane) of an integer vector index whose lanes never fall from
    one lane to the next, else None: broadcasts, ramps of a constant stride >= 0, non-decreasing
    constants, their sums, products by constants >= 0, floor divisions by constants > 0 and
    clamps by a scalar keep that order. The lanes of (b + 44 l) // 89 (a 37 -> 74 align_corners
    resize, no period of 16 lanes) lie within 8 elements of lane 0: one vector of the buffer
    holds them, whatever b is."""
    if type(e) is Broadcast:
        return 0
    if (lanes := constant_lanes(e)) is not None:
        return lanes[-1] - lanes[0] if all(a <= b for a, b in itertools.pairwise(lanes)) else None
    if type(e) is Ramp:
        stride = constant_lanes(e.stride)
        return stride[0] * (e.lanes - 1) if stride is not None and stride[0] >= 0 else None
    if type(e) is not Binary:
        return None
    if e.op is BinOp.ADD:
        a, b = rising_spread(e.a), rising_spread(e.b)
        return None if a is None or b is None else a + b
    ka, kb = _uniform(e.a), _uniform(e.b)
    if e.op is BinOp.MUL:
        vec, k = (e.a, kb) if kb is not None else (e.b, ka)
        spread = None if k is None or k < 0 else rising_spread(vec)
        return None if spread is None or k is None else spread * k
    if e.op is BinOp.FLOORDIV and kb is not None and kb > 0:
        spread = rising_spread(e.a)
        return None if spread is None else spread // kb + 1
    if e.op in (BinOp.MIN, BinOp.MAX):
        for vec, clamp in ((e.a, e.b), (e.b, e.a)):
            if type(clamp) is Broadcast or _uniform(clamp) is not None:
                return rising_spread(vec)
    return None


def _uniform(e: Expr) -> int | None:
    """The constant every lane of `e` holds, if it is one."""
    lanes = constant_lanes(e)
    return lanes[0] if lanes is not None and len(set(lanes)) == 1 else None
