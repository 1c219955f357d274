"""Vectorize: a VECTORIZED loop becomes one pass of vector code over `extent` lanes.

The loop variable becomes Ramp(0, 1, lanes); scalars meeting vectors are broadcast; contiguous
accesses become vector loads and stores. A tail guard on the loop variable (from a split that
does not divide) is handled by versioning: vector code when every lane passes the guard, else the
same vector code with the guard as a mask on the loads and stores it guarded (`_masked_tail`), so
a tail costs one pass of masked vectors rather than a scalar loop of guarded elements. Where masking
cannot keep every lane's work safe (a scalar load the guard protected, an integer division by a
variable), the tail is the original scalar loop. A loop that cannot be vectorized runs as a
scalar loop, with a warning that says why.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable

from ...dtype import dtype_info
from ...target import MASKED_REGISTER_BYTES
from ...te.expr import And, Binary, BinOp, Call, Cast, CmpOp, Compare, Const, Expr, Not, Or, Select, Var
from ...te.traversal import substitute, transform, walk
from ..bounds import direction
from ..functor import uses_var
from ..nodes import Allocate, Broadcast, Evaluate, For, ForKind, IfThenElse, Let, Load, Prefetch, Ramp, Seq, Stmt, Store


class NotVectorizable(Exception):
    """Raised inside the pass when a loop body has a construct that cannot run as lanes."""


def _bcast(e: Expr, lanes: int) -> Expr:
    return e if e.lanes == lanes else Broadcast(e, lanes)


class _Vectorizer:
    def __init__(self, var: Var, lanes: int) -> None:
        self.var, self.lanes = var, lanes

    def expr(self, e: Expr) -> Expr:
        t = type(e)
        if e is self.var:
            return Ramp(Const(0, e.dtype), Const(1, e.dtype), self.lanes)
        if isinstance(e, (Var, Const)):
            return e
        if t in (Ramp, Broadcast) or e.lanes != 1:
            raise NotVectorizable(f"nested vector expression {e}")
        if type(e) is Binary:
            return self._binary(e.op, self.expr(e.a), self.expr(e.b))
        if type(e) is Load:
            idx = self.expr(e.index)
            pred = None if e.predicate is None else self.expr(e.predicate)
            if idx.lanes == 1 and (pred is None or pred.lanes == 1):
                return Load(e.buffer, idx, pred)
            return Load(e.buffer, _bcast(idx, self.lanes), None if pred is None else _bcast(pred, self.lanes))
        if isinstance(e, (Compare, And, Or)):
            a, b = self.expr(e.a), self.expr(e.b)
            n = max(a.lanes, b.lanes)
            if isinstance(e, Compare):
                return Compare(e.op, _bcast(a, n), _bcast(b, n))
            return type(e)(_bcast(a, n), _bcast(b, n))
        if type(e) is Not:
            return Not(self.expr(e.a))
        if type(e) is Select:
            parts = [self.expr(x) for x in (e.cond, e.t, e.f)]
            n = max(p.lanes for p in parts)
            return Select(*(_bcast(p, n) for p in parts))
        if type(e) is Call:
            args = [self.expr(a) for a in e.args]
            n = max(a.lanes for a in args)
            return Call(e.fn, tuple(_bcast(a, n) for a in args), e.dtype)
        if type(e) is Cast:
            return Cast(e.dtype, self.expr(e.value))
        raise NotVectorizable(f"unsupported expression {type(e).__name__}")

    def _binary(self, op: BinOp, a: Expr, b: Expr) -> Expr:
        n = max(a.lanes, b.lanes)
        if n == 1:
            return Binary(op, a, b)
        # Ramp has no subclasses: isinstance is `type(x) is Ramp`, in a form the type checker narrows
        if op in (BinOp.ADD, BinOp.SUB) and (isinstance(a, Ramp) or a.lanes == 1) and \
                (isinstance(b, Ramp) or b.lanes == 1):
            base_a, stride_a = (a.base, a.stride) if isinstance(a, Ramp) else (a, Const(0, a.dtype))
            base_b, stride_b = (b.base, b.stride) if isinstance(b, Ramp) else (b, Const(0, b.dtype))
            return Ramp(Binary(op, base_a, base_b), Binary(op, stride_a, stride_b), n)
        if op is BinOp.MUL and isinstance(a, Ramp) and b.lanes == 1:
            return Ramp(Binary(op, a.base, b), Binary(op, a.stride, b), n)
        if op is BinOp.MUL and isinstance(b, Ramp) and a.lanes == 1:
            return Ramp(Binary(op, a, b.base), Binary(op, a, b.stride), n)
        return Binary(op, _bcast(a, n), _bcast(b, n))

    def stmt(self, s: Stmt) -> Stmt:
        t = type(s)
        if type(s) is Store:
            idx, val = self.expr(s.index), self.expr(s.value)
            pred = None if s.predicate is None else self.expr(s.predicate)
            if idx.lanes == 1:
                raise NotVectorizable(f"store to {s.buffer.name}[{s.index}] is the same element in every lane")
            return Store(s.buffer, idx, _bcast(val, self.lanes), None if pred is None else _bcast(pred, self.lanes))
        if type(s) is For:
            if s.kind not in (ForKind.SERIAL, ForKind.UNROLLED):
                raise NotVectorizable(f"inner loop {s.var.name} is {s.kind.value}")
            return For(s.var, s.extent, s.kind, self.stmt(s.body), s.thread)
        if type(s) is IfThenElse:
            if uses_var(s.cond, self.var):
                raise NotVectorizable(f"condition {s.cond} depends on the lane")
            return IfThenElse(s.cond, self.stmt(s.then_case), None if s.else_case is None else self.stmt(s.else_case))
        if type(s) is Seq:
            return Seq(tuple(self.stmt(x) for x in s.stmts))
        if type(s) is Let:
            if uses_var(s.value, self.var):
                raise NotVectorizable(f"let {s.var.name} depends on the lane")
            return Let(s.var, s.value, self.stmt(s.body))
        if t in (Evaluate, Prefetch) and not uses_var(s, self.var):
            return s
        if type(s) is Allocate:
            raise NotVectorizable(f"allocation of {s.buffer.name} inside the loop (one per lane)")
        raise NotVectorizable(f"unsupported statement {t.__name__}")


def _is_convex_guard(cond: Expr, var: Var) -> bool:
    """A conjunction of comparisons monotone in `var` (not !=): true at both ends => true inside."""
    if type(cond) is And:
        return _is_convex_guard(cond.a, var) and _is_convex_guard(cond.b, var)
    if type(cond) is not Compare or cond.op is CmpOp.NE or cond.a.dtype not in ("int32", "int64"):
        return False
    return direction(Binary(BinOp.SUB, cond.a, cond.b), var) is not None


def _bound_inside(body: Stmt) -> set[Var]:
    out: set[Var] = set()
    walk(body, lambda n: out.add(n.var) if isinstance(n, (For, Let)) else None)
    return out


def vectorize_loop(loop: For) -> Stmt:
    v, n = loop.var, loop.extent
    guards: list[Expr] = []
    inner_vars = _bound_inside(loop.body)

    def strip(node: object) -> Stmt | None:
        if isinstance(node, IfThenElse) and node.else_case is None and uses_var(node.cond, v):
            if not _is_convex_guard(node.cond, v) or any(uses_var(node.cond, x) for x in inner_vars):
                raise NotVectorizable(f"condition {node.cond} depends on the lane")
            guards.append(node.cond)
            return node.then_case
        return None

    try:
        body = _Vectorizer(v, n).stmt(transform(loop.body, strip))
    except NotVectorizable as why:
        warnings.warn(f"loop {v.name} runs as a scalar loop, not vectorized: {why}", stacklevel=2)
        return For(v, n, ForKind.SERIAL, loop.body, loop.thread)
    if not guards:
        return body
    all_lanes: Expr | None = None
    for g in guards:
        for end in (0, n - 1):
            c = substitute(g, {v: Const(end, v.dtype)})
            all_lanes = c if all_lanes is None else And(all_lanes, c)
    assert all_lanes is not None   # guards is not empty
    tail = _masked_tail(loop.body, v, n)
    return IfThenElse(all_lanes, body, tail if tail is not None else For(v, n, ForKind.SERIAL, loop.body, loop.thread))


def _masked_tail(scalar_body: Stmt, var: Var, lanes: int) -> Stmt | None:
    """The loop body as vector code with each tail guard turned into a mask on the loads and
    stores it guarded (the statements outside a guard run in every lane, as in the scalar loop),
    or None when a masked-off lane could still fault: a scalar load runs whatever the mask (the
    guard may have been what kept it in bounds), and an integer division by a non-constant may
    divide by zero in a lane the guard excluded. None too for accesses wider than
    MASKED_REGISTER_BYTES: a masked pass costs what a full one does, so a tail of a few lanes of a
    vector spanning several registers runs faster as scalars (a 3x3 stride-2 max pool, rows of
    71 in blocks of 64: 1.0 ms with a scalar tail, 1.75 masked; in blocks of 16: 0.42 -> 0.24 ms
    masked)."""

    def guarded(pred: Expr | None, cond: Expr) -> Expr:
        return cond if pred is None else And(pred, cond)

    def mask_under(cond: Expr) -> Callable[[object], Stmt | Expr | None]:
        def add(node: object) -> Stmt | Expr | None:
            if type(node) is Store:
                return Store(node.buffer, node.index, node.value, guarded(node.predicate, cond))
            if type(node) is Load:
                return Load(node.buffer, node.index, guarded(node.predicate, cond))
            return None
        return add

    def unguard(node: object) -> Stmt | None:
        if isinstance(node, IfThenElse) and node.else_case is None and uses_var(node.cond, var):
            return transform(node.then_case, mask_under(node.cond))
        return None

    try:
        body = _Vectorizer(var, lanes).stmt(transform(scalar_body, unguard))
    except NotVectorizable:
        return None
    unsafe: list[object] = []

    def check(node: object) -> None:
        if isinstance(node, (Load, Store)):
            wide = node.index.lanes * dtype_info(node.buffer.dtype).bytes > MASKED_REGISTER_BYTES
            if wide or node.index.lanes == 1:
                unsafe.append(node)
        elif isinstance(node, Binary) and node.op in (BinOp.FLOORDIV, BinOp.FLOORMOD) and not _nonzero_const(node.b):
            unsafe.append(node)

    walk(body, check)
    return None if unsafe else body


def _nonzero_const(e: Expr) -> bool:
    """A divisor no lane can see as zero: a constant, or one broadcast to every lane."""
    if type(e) is Broadcast:
        e = e.value
    return type(e) is Const and e.value != 0


def vectorize_loops(s: Stmt) -> Stmt:
    """Vectorize every VECTORIZED loop, innermost first."""
    return transform(s, lambda n: vectorize_loop(n) if isinstance(n, For) and n.kind is ForKind.VECTORIZED else None)
