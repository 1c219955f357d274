"""The simplifier: a table of small rewrite rules applied bottom-up to a fixed point.

Each rule takes a node and the constant ranges of the variables in scope and returns a
replacement or None. Integer sums are kept in a canonical linear form (terms with coefficients
plus a constant) so index arithmetic from split/fuse folds away; interval bounds turn guards
that always hold into constants. Float arithmetic is only constant-folded: reassociating it
would change results.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

from ...te.expr import And, Binary, BinOp, Cast, CmpOp, Compare, Const, Expr, Node, Not, Or, Select, Var, const
from ...te.traversal import child_fields, field_names, substitute
from ..bounds import Interval, const_bound
from ..nodes import Allocate, Broadcast, For, ForKind, IfThenElse, Let, Load, Prefetch, Ramp, Seq, Stmt, Store, seq

Ranges = dict[Var, Interval]
MAX_SWEEPS = 8  # rewrites of one node before giving up (a guard against rule cycles)


def _is_int(e: Expr) -> bool:
    return e.dtype in ("int32", "int64") and e.lanes == 1


def _c(e: Expr) -> Any:
    return e.value if type(e) is Const else None


# -- canonical linear forms of integer expressions -------------------------------------------
def _key(e: Expr) -> Any:
    """A structural key: equal for structurally equal expressions, variables by identity."""
    if type(e) is Var:
        return id(e)
    if type(e) is Const:
        return (e.value, e.dtype)
    if type(e) is Binary:
        return (e.op, _key(e.a), _key(e.b))
    return id(e)


def _same_key(a: Expr, b: Expr) -> bool:
    """_key(a) == _key(b), without building either key (it stops at the first difference)."""
    if a is b:
        return True
    if type(a) is Const and type(b) is Const:
        return bool(a.value == b.value) and a.dtype == b.dtype
    if type(a) is Binary and type(b) is Binary:
        return a.op is b.op and _same_key(a.a, b.a) and _same_key(a.b, b.b)
    return False


_LINEAR: dict[int, tuple[Expr, dict[Any, list], int | float]] = {}
MAX_LINEAR = 50_000      # sums remembered (bottom-up, each sum's form is its parent's start)


def _summands(e: Expr) -> tuple[tuple[Expr, int | float], ...] | None:
    """The operands a sum, a difference or a product by a constant distributes over, each with
    its factor; None for a term."""
    if type(e) is not Binary:
        return None
    if e.op is BinOp.ADD:
        return (e.a, 1), (e.b, 1)
    if e.op is BinOp.SUB:
        return (e.a, 1), (e.b, -1)
    if e.op is BinOp.MUL and type(e.b) is Const:
        return ((e.a, e.b.value),)
    if e.op is BinOp.MUL and type(e.a) is Const:
        return ((e.b, e.a.value),)
    return None


def _linear_form(e: Expr) -> tuple[dict[Any, list], int | float]:
    """`linear` before dropping zero terms, remembered by identity: a chain of k additions is
    read once, not once per link (k^2), as the simplifier meets each link bottom-up. The terms
    keep the order they are first met in, so the remembered form merges as the walk would."""
    hit = _LINEAR.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1], hit[2]
    terms: dict[Any, list] = {}
    c0: int | float = 0

    def merge(x: Expr, k: int | float) -> None:
        nonlocal c0
        if type(x) is Const:
            c0 += k * x.value
            return
        if _summands(x) is not None:
            sub, sub_c0 = _linear_form(x)
            for key, (term, q) in sub.items():
                terms.setdefault(key, [term, 0])[1] += k * q
            c0 += k * sub_c0
            return
        terms.setdefault(_key(x), [x, 0])[1] += k

    for x, k in _summands(e) or ((e, 1),):
        merge(x, k)
    if len(_LINEAR) >= MAX_LINEAR:
        _LINEAR.clear()
    _LINEAR[id(e)] = (e, terms, c0)
    return terms, c0


def linear(e: Expr) -> tuple[dict[Any, list], int | float]:
    """e as {key: [term, coeff]} and a constant: sum(coeff * term) + const (x + y - 3*x + 2 reads
    as {x: -2, y: 1} and 2; products by a constant distribute, anything else is a term)."""
    terms, c0 = _linear_form(e)
    return {k: [t, q] for k, (t, q) in terms.items() if q != 0}, c0


def from_linear(terms: dict[Any, list], c0: int | float, dtype: str) -> Expr:
    out: Expr | None = None
    for term, k in terms.values():
        mag = term if abs(k) == 1 else Binary(BinOp.MUL, term, Const(abs(k), dtype))
        if out is None:
            out = mag if k > 0 else Binary(BinOp.SUB, Const(0, dtype), mag)
        else:
            out = Binary(BinOp.ADD if k > 0 else BinOp.SUB, out, mag)
    if out is None:
        return Const(c0, dtype)
    if c0 > 0:
        return Binary(BinOp.ADD, out, Const(c0, dtype))
    if c0 < 0:
        return Binary(BinOp.SUB, out, Const(-c0, dtype))
    return out


# -- rules ---------------------------------------------------------------------------------------
_FOLD: dict[BinOp, Callable[[Any, Any], Any]] = {
    BinOp.ADD: lambda a, b: a + b, BinOp.SUB: lambda a, b: a - b, BinOp.MUL: lambda a, b: a * b,
    BinOp.DIV: lambda a, b: a / b if b != 0 else None, BinOp.FLOORDIV: lambda a, b: a // b if b != 0 else None,
    BinOp.FLOORMOD: lambda a, b: a % b if b != 0 else None, BinOp.MAX: max, BinOp.MIN: min,
}
_CMP: dict[CmpOp, Callable[[Any, Any], bool]] = {
    CmpOp.LT: lambda a, b: a < b, CmpOp.LE: lambda a, b: a <= b, CmpOp.GT: lambda a, b: a > b,
    CmpOp.GE: lambda a, b: a >= b, CmpOp.EQ: lambda a, b: a == b, CmpOp.NE: lambda a, b: a != b,
}


def fold_binary(e: Binary, r: Ranges) -> Expr | None:
    # c1 op c2 -> c
    a, b = _c(e.a), _c(e.b)
    if a is None or b is None or e.lanes != 1:
        return None
    v = _FOLD[e.op](a, b)
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    return const(v, e.dtype)


def identities(e: Binary, r: Ranges) -> Expr | None:
    a, b, op = _c(e.a), _c(e.b), e.op
    if op is BinOp.ADD and b == 0 and e.b.lanes == 1:
        return e.a                                      # x + 0 -> x
    if op is BinOp.ADD and a == 0 and e.a.lanes == 1:
        return e.b                                      # 0 + x -> x
    if op is BinOp.SUB and b == 0 and e.b.lanes == 1:
        return e.a                                      # x - 0 -> x
    if op is BinOp.MUL and b == 1 and e.b.lanes == 1:
        return e.a                                      # x * 1 -> x
    if op is BinOp.MUL and a == 1 and e.a.lanes == 1:
        return e.b                                      # 1 * x -> x
    if op is BinOp.DIV and b == 1 and e.b.lanes == 1:
        return e.a                                      # x / 1 -> x
    if op is BinOp.FLOORDIV and b == 1:
        return e.a                                      # x // 1 -> x
    if op is BinOp.FLOORMOD and b == 1:
        return Const(0, e.dtype)                        # x % 1 -> 0
    if op is BinOp.MUL and _is_int(e) and (a == 0 or b == 0):
        return Const(0, e.dtype)                        # x * 0 -> 0   (ints only: NaN * 0 is NaN)
    return None


def canonical_sum(e: Binary, r: Ranges) -> Expr | None:
    # (x + c1) + c2 -> x + (c1+c2);  x*4 - x*4 + y -> y;  (x*2)*3 -> x*6
    if e.op not in (BinOp.ADD, BinOp.SUB, BinOp.MUL) or not _is_int(e):
        return None
    terms, c0 = linear(e)
    out = from_linear(terms, c0, e.dtype)
    return None if _same_key(out, e) else out


def div_mod_recombine(e: Binary, r: Ranges) -> Expr | None:
    # (x // c) * c + x % c -> x   (floor division and modulo, any integer x, c > 0)
    if e.op not in (BinOp.ADD, BinOp.SUB) or not _is_int(e):
        return None
    terms, c0 = linear(e)
    for key, (t, k) in terms.items():
        c = _c(t.b) if type(t) is Binary and t.op is BinOp.FLOORMOD else None
        if c is None or c <= 0:
            continue
        div_key = (BinOp.FLOORDIV, _key(t.a), _key(t.b))
        if div_key not in terms or terms[div_key][1] != k * c:
            continue
        out = {kk: [tt, q] for kk, (tt, q) in terms.items() if kk not in (key, div_key)}
        x_terms, x_c0 = linear(t.a)
        for kk, (tt, q) in x_terms.items():
            out.setdefault(kk, [tt, 0])[1] += k * q
        return from_linear({kk: v for kk, v in out.items() if v[1]}, c0 + k * x_c0, e.dtype)
    return None


def div_mod(e: Binary, r: Ranges) -> Expr | None:
    # (c*q*x + y) // c -> q*x + y // c  and  (c*q*x + y) % c -> y % c;  y // c -> k when y in [k*c, (k+1)*c)
    c = _c(e.b)
    if e.op not in (BinOp.FLOORDIV, BinOp.FLOORMOD) or not _is_int(e) or c is None or c <= 0:
        return None
    terms, c0 = linear(e.a)
    whole = {k: [t, q // c] for k, (t, q) in terms.items() if q % c == 0}
    rest = {k: v for k, v in terms.items() if k not in whole}
    rest_expr = from_linear(rest, c0, e.dtype)
    bound = const_bound(rest_expr, r)
    if bound is None or bound[0] // c != bound[1] // c:
        if not whole:
            return None
        q = Binary(e.op, rest_expr, e.b)                # pull the divisible terms out
        if e.op is BinOp.FLOORMOD:
            return q
        return Binary(BinOp.ADD, from_linear(whole, 0, e.dtype), q)
    k = bound[0] // c
    if e.op is BinOp.FLOORMOD:
        return from_linear(rest, c0 - k * c, e.dtype)
    return from_linear(whole, k, e.dtype)


def nested_div(e: Binary, r: Ranges) -> Expr | None:
    # (x // a) // b -> x // (a*b)   for a, b > 0
    if e.op is not BinOp.FLOORDIV or type(e.a) is not Binary or e.a.op is not BinOp.FLOORDIV:
        return None
    a, b = _c(e.a.b), _c(e.b)
    if a is None or b is None or a <= 0 or b <= 0:
        return None
    return Binary(BinOp.FLOORDIV, e.a.a, Const(a * b, e.dtype))


def min_max_bounds(e: Binary, r: Ranges) -> Expr | None:
    # min(x, y) -> x when x - y <= 0 always;  max(x, y) -> x when x - y >= 0 always
    if e.op not in (BinOp.MIN, BinOp.MAX) or not _is_int(e):
        return None
    terms, c0 = linear(Binary(BinOp.SUB, e.a, e.b))
    d = const_bound(from_linear(terms, c0, e.dtype), r)
    if d is None:
        return None
    if e.op is BinOp.MIN:
        return e.a if d[1] <= 0 else e.b if d[0] >= 0 else None
    return e.a if d[0] >= 0 else e.b if d[1] <= 0 else None


def fold_compare(e: Compare, r: Ranges) -> Expr | None:
    # c1 < c2 -> true/false;  x < c -> true when max(x) < c (interval bounds)
    if e.lanes != 1:
        return fold_lane_compare(e, r)
    a, b = _c(e.a), _c(e.b)
    if a is not None and b is not None:
        return Const(_CMP[e.op](a, b), "bool")
    if not _is_int(e.a):
        return None
    terms, c0 = linear(Binary(BinOp.SUB, e.a, e.b))
    bound = const_bound(from_linear(terms, c0, e.a.dtype), r)
    if bound is None:
        return None
    lo, hi = bound
    if _CMP[e.op](lo, 0) and _CMP[e.op](hi, 0) and e.op is not CmpOp.NE and e.op is not CmpOp.EQ:
        return Const(True, "bool")
    if not _CMP[e.op](lo, 0) and not _CMP[e.op](hi, 0) and e.op in (CmpOp.LT, CmpOp.LE, CmpOp.GT, CmpOp.GE):
        return Const(False, "bool")
    if lo == hi:
        return Const(_CMP[e.op](lo, 0), "bool")
    return None


def fold_lane_compare(e: Compare, r: Ranges) -> Expr | None:
    # ramp(b, s, n) < x(B) -> x(true) when the first and the last lane hold (a lane's value lies
    # between theirs), x(false) when neither does: a tail's mask that an unrolled tile's vector
    # entirely inside, or entirely past, the edge carries
    first, final = _end_lanes(e, r)
    if first is None or first != final:
        return None
    return Broadcast(Const(first, "bool"), e.lanes)


def _end_lanes(e: Expr, r: Ranges) -> tuple[Any, Any]:
    """The constant truths of the first and the last lane of a mask `ramp(b, s, n) op x(B)`
    (op an order), each None where unknown."""
    if not (type(e) is Compare and e.op not in (CmpOp.EQ, CmpOp.NE) and type(e.a) is Ramp
            and type(e.b) is Broadcast and type(e.a.stride) is Const):
        return None, None
    ramp, bound = cast(Ramp, e.a), cast(Broadcast, e.b).value
    last = Binary(BinOp.ADD, ramp.base, Const((ramp.lanes - 1) * cast(Const, ramp.stride).value, ramp.base.dtype))
    folded = (fold_compare(Compare(e.op, x, bound), r) for x in (ramp.base, last))
    first, final = (None if f is None else _c(f) for f in folded)
    return first, final


def fold_logic(e: Not | And | Or, r: Ranges) -> Expr | None:
    # true && x -> x;  false && x -> false;  true || x -> true;  !true -> false
    if isinstance(e, Not):
        v = _c(e.a)
        return None if v is None else Const(not v, "bool")
    a, b = _c(e.a), _c(e.b)
    if type(e) is And:
        if a is False or b is False:
            return Const(False, "bool")
        return e.b if a is True else e.a if b is True else None
    if a is True or b is True:
        return Const(True, "bool")
    return e.b if a is False else e.a if b is False else None


def _truth(e: Expr | None) -> Any:
    """The constant truth of a condition (scalar or broadcast), or None."""
    if type(e) is Broadcast:
        e = e.value
    return _c(e) if e is not None else None


def fold_load_predicate(e: Load, r: Ranges) -> Expr | None:
    # A[i if true] -> A[i];  A[x(i) if m] -> x(A[i]) when a lane of m is on: every lane reads
    # A[i], which one lane in bounds proves in bounds (a register tile's row operand in a tail)
    if e.predicate is None:
        return None
    if _truth(e.predicate) is True:
        return Load(e.buffer, e.index)
    if type(e.index) is Broadcast and True in _end_lanes(e.predicate, r):
        return Broadcast(Load(e.buffer, e.index.value), e.index.lanes)
    return None


def fold_select(e: Select, r: Ranges) -> Expr | None:
    # select(true, x, y) -> x;  select(false, x, y) -> y
    c = _truth(e.cond)
    if c is None or e.t.lanes != e.f.lanes:
        return None
    return e.t if c else e.f


def fold_cast(e: Cast, r: Ranges) -> Expr | None:
    # int32(3.7) -> 3 (numpy truncates toward zero);  float32(2) -> 2.0;  T(x: T) -> x
    if e.value.dtype == e.dtype:
        return e.value
    v = _c(e.value)
    if v is None:
        return None
    return const(int(v) if e.dtype.startswith("int") else v, e.dtype)


RULES: dict[type, list[Callable[[Any, Ranges], Expr | None]]] = {
    Binary: [fold_binary, identities, canonical_sum, div_mod_recombine, div_mod, nested_div, min_max_bounds],
    Compare: [fold_compare],
    And: [fold_logic], Or: [fold_logic], Not: [fold_logic],
    Select: [fold_select],
    Cast: [fold_cast],
    Load: [fold_load_predicate],
}


Memo = dict[int, tuple[Expr, Expr]]


def _simp(e: Expr, r: Ranges, memo: Memo, budget: int = MAX_SWEEPS) -> Expr:
    """Simplify children first, then rewrite this node until no rule applies (memoised by identity:
    a variable has one range wherever it appears, so a shared subtree simplifies the same everywhere)."""
    hit = memo.get(id(e))
    if hit is not None and hit[0] is e:
        return hit[1]
    t = type(e)
    if t is Var or t is Const:
        return e
    changed: dict[str, Any] = {}
    for name in child_fields(t):
        v = getattr(e, name)
        if isinstance(v, Node):
            nv = _simp(cast(Expr, v), r, memo)   # the Node fields of an expression are expressions
            if nv is not v:
                changed[name] = nv
        elif isinstance(v, tuple) and v and isinstance(v[0], Node):
            nt = tuple(_simp(cast(Expr, x), r, memo) for x in v)
            if any(a is not b for a, b in zip(nt, v)):
                changed[name] = nt
    out = t(**{n: changed.get(n, getattr(e, n)) for n in field_names(t)}) if changed else e
    for rule in RULES.get(type(out), ()):
        new = rule(out, r)
        if new is not None:
            out = _simp(new, r, memo, budget - 1) if budget > 0 else new
            break
    memo[id(e)] = (e, out)
    return out


def simplify_expr(e: Expr, ranges: Ranges | None = None, memo: Memo | None = None) -> Expr:
    """Simplify `e` given constant ranges of its variables."""
    return _simp(e, ranges or {}, {} if memo is None else memo)


# -- statements ----------------------------------------------------------------------------------
def _stmt(s: Stmt, r: Ranges, m: Memo) -> Stmt | None:
    if type(s) is For:
        if s.extent == 1 and s.kind is not ForKind.THREAD_BOUND:
            return _stmt(substitute(s.body, {s.var: Const(0, s.var.dtype)}), r, m)
        r[s.var] = (0, s.extent - 1)
        body = _stmt(s.body, r, m)
        del r[s.var]
        return None if body is None else For(s.var, s.extent, s.kind, body, s.thread)
    if type(s) is Store:
        pred = None if s.predicate is None else simplify_expr(s.predicate, r, m)
        if _truth(pred) is False:
            return None
        return Store(s.buffer, simplify_expr(s.index, r, m), simplify_expr(s.value, r, m),
                     None if _truth(pred) is True else pred)
    if type(s) is Prefetch:
        return Prefetch(s.buffer, simplify_expr(s.index, r, m))
    if type(s) is IfThenElse:
        cond = simplify_expr(s.cond, r, m)
        if _c(cond) is not None:
            return _stmt(s.then_case, r, m) if _c(cond) else (None if s.else_case is None else _stmt(s.else_case, r, m))
        then = _stmt(s.then_case, r, m)
        other = None if s.else_case is None else _stmt(s.else_case, r, m)
        if then is None and other is None:
            return None
        return IfThenElse(cond, then if then is not None else Seq(()), other)
    if type(s) is Seq:
        parts = [_stmt(x, r, m) for x in s.stmts]
        parts = [p for p in parts if p is not None]
        return seq(*parts) if parts else None
    if type(s) is Let:
        value = simplify_expr(s.value, r, m)
        if type(value) in (Const, Var):
            return _stmt(substitute(s.body, {s.var: value}), r, m)
        bound = const_bound(value, r)
        if bound is not None:
            r[s.var] = bound
        body = _stmt(s.body, r, m)
        r.pop(s.var, None)
        return None if body is None else Let(s.var, value, body)
    if type(s) is Allocate:
        body = _stmt(s.body, r, m)
        return None if body is None else Allocate(s.buffer, body)
    return s


def simplify(s: Stmt) -> Stmt:
    """Simplify every expression of `s` with the ranges of the loops around it; drop dead code."""
    out = _stmt(s, {}, {})
    return Seq(()) if out is None else out
