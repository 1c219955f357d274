"""Interval bounds of integer expressions.

`const_bound` gives constant [lo, hi] from constant variable ranges (the simplifier uses it to
drop always-true guards and fold div/mod). `symbolic_bound` keeps some variables symbolic and
relaxes others over their ranges: bound inference uses it for the region a loop body touches,
loop partition for the condition under which a guard holds across the loops below it.
`direction` says whether an expression is monotone in one variable (vectorize and loop partition
use it to tell when a guard true at two points is true between them).
"""
from __future__ import annotations

from collections.abc import Callable

from ..te.expr import Binary, BinOp, Cast, Const, Expr, Select, Var
from .functor import uses_var

Interval = tuple[int, int]


def const_bound(e: Expr, ranges: dict[Var, Interval]) -> Interval | None:
    """Constant [lo, hi] containing every value of the int expression `e`, or None if unknown."""
    if type(e) is Const:
        return (int(e.value), int(e.value)) if e.dtype != "bool" and isinstance(e.value, int) else None
    if type(e) is Var:
        return ranges.get(e)
    if type(e) is Cast:
        return const_bound(e.value, ranges) if e.dtype.startswith("int") and e.value.dtype.startswith("int") else None
    if type(e) is Select:
        a, b = const_bound(e.t, ranges), const_bound(e.f, ranges)
        return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
    if type(e) is not Binary or not e.dtype.startswith("int"):
        return None
    a = const_bound(e.a, ranges)
    if e.op is BinOp.FLOORMOD:
        b = const_bound(e.b, ranges)
        if b is not None and b[0] == b[1] and b[0] > 0:
            c = b[0]
            if a is not None and a[0] // c == a[1] // c:
                return (a[0] % c, a[1] % c)
            return (0, c - 1)
        return None
    b = const_bound(e.b, ranges)
    if a is None or b is None:
        return None
    return _combine(e.op, a, b)


def _combine(op: BinOp, a: Interval, b: Interval) -> Interval | None:
    if op is BinOp.ADD:
        return (a[0] + b[0], a[1] + b[1])
    if op is BinOp.SUB:
        return (a[0] - b[1], a[1] - b[0])
    if op is BinOp.MUL:
        prods = [x * y for x in a for y in b]
        return (min(prods), max(prods))
    if op is BinOp.FLOORDIV:
        if b[0] > 0:
            qs = [x // y for x in a for y in b]
            return (min(qs), max(qs))
        return None
    if op is BinOp.MAX:
        return (max(a[0], b[0]), max(a[1], b[1]))
    if op is BinOp.MIN:
        return (min(a[0], b[0]), min(a[1], b[1]))
    return None


SymInterval = tuple[Expr, Expr]


def symbolic_bound(e: Expr, relax: dict[Var, SymInterval],
                   is_const: Callable[[Expr], int | None]) -> SymInterval | None:
    """[lo, hi] of `e` as expressions: variables in `relax` range over their interval, others stay.

    `is_const` returns the value of a constant expression (after simplification) or None. Returns
    None where the expression is not one bound inference understands (the caller then takes the
    whole tensor, which is always correct).
    """
    if type(e) is Const:
        return (e, e)
    if type(e) is Var:
        return relax.get(e, (e, e))
    if type(e) is Select:
        a, b = symbolic_bound(e.t, relax, is_const), symbolic_bound(e.f, relax, is_const)
        if a is None or b is None:
            return None
        return (Binary(BinOp.MIN, a[0], b[0]), Binary(BinOp.MAX, a[1], b[1]))
    if type(e) is not Binary:
        return None
    a = symbolic_bound(e.a, relax, is_const)
    b = symbolic_bound(e.b, relax, is_const)
    if a is None or b is None:
        return None
    if a[0] is a[1] and b[0] is b[1]:
        point = Binary(e.op, a[0], b[0])  # nothing relaxed below: a single value
        return (point, point)
    op = e.op
    if op is BinOp.ADD:
        return (a[0] + b[0], a[1] + b[1])
    if op is BinOp.SUB:
        return (a[0] - b[1], a[1] - b[0])
    if op in (BinOp.MAX, BinOp.MIN):
        return (Binary(op, a[0], b[0]), Binary(op, a[1], b[1]))
    c = is_const(e.b) if b[0] is b[1] else None
    if c is None and op is BinOp.MUL and a[0] is a[1]:
        a, b, c = b, a, is_const(e.a)
    if c is None:
        return None
    if op is BinOp.MUL:
        return (a[0] * c, a[1] * c) if c >= 0 else (a[1] * c, a[0] * c)
    if op is BinOp.FLOORDIV and c > 0:
        return (a[0] // c, a[1] // c)
    if op is BinOp.FLOORMOD and c > 0:
        return (Const(0, e.dtype), Const(c - 1, e.dtype))
    return None


def direction(e: Expr, var: Var) -> int | None:
    """+1 / -1 when e is non-decreasing / non-increasing in var, 0 when it does not use it, else None."""
    if not uses_var(e, var):
        return 0
    if e is var:
        return 1
    if type(e) is Binary and e.op in (BinOp.ADD, BinOp.SUB):
        da, db = direction(e.a, var), direction(e.b, var)
        if da is None or db is None:
            return None
        db = -db if e.op is BinOp.SUB else db
        return None if da * db < 0 else (da or db)
    if type(e) is Binary and e.op in (BinOp.MUL, BinOp.FLOORDIV) and type(e.b) is Const:
        if e.op is BinOp.FLOORDIV and e.b.value <= 0:
            return None
        d = direction(e.a, var)
        return None if d is None else d * (1 if e.b.value > 0 else -1 if e.b.value < 0 else 0)
    return None
