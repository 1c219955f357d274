"""Loop partition: tails cost only the tail (TVM's LoopPartition, with versioning where it cannot split).

A split that does not divide leaves a guard such as `io*8 + ii < 37` in the nest (schedule_ops),
and every iteration pays for it: the vector loop under it is versioned once per vector, unrolled
copies carry branches. For a loop L and a guard below it, relaxing the loops between L and the
guard over their ranges gives a condition on L's iteration (`hoisted`) under which the guard holds
everywhere below; where it holds, the guard is replaced by true and the simplifier drops it:

- partition (serial L, hoisted condition monotone in L's variable alone): L becomes up to three
  loops, [0, lo) and [hi, n) with the original body and [lo, hi) without the guards. The ranges
  run in the original order, so reductions keep their order of summation.
- version (parallel L, or a condition that also reads outer loops or is not monotone, such as
  `fused % 2` of a fused tile loop): L's body becomes `if hoisted: body without the guards else:
  body`, one test per iteration of L instead of one per inner iteration. A parallel loop stays one
  parallel region whose threads take main and tail iterations alike. Only guards below a serial
  or unrolled loop inside L are versioned: one right under its vector loop is tested once per
  vector by vectorize already (a row tail inside a fused loop stays that way).

Which guards: tail guards (an IfThenElse without else), select conditions (te.if_then_else:
padding, packing) and the predicates of loads (a load under te.if_then_else carries its condition
too: left there, a 3x3 average pool's masked row loads ran 4x slower than the pool's max) that sit
inside or around a vectorized or unrolled loop below L, where they cost per element; a guard on
scalar code costs a predictable branch and is left to LLVM. That includes
a bound on L's variable alone (the row padding of a repack whose rows are the parallel loop): per
element of its unrolled columns it made every load a predicated one (ResNet-50's 128-channel
3x3 stride-2 layer, blocked: the repack took 19% of the kernel's time, with no padding 7%).
Loops are visited outermost first, so a guard is hoisted as far out as it goes.

Growth cap: each partition piece and each version copies a loop body once. A root loop nest gets
at most MAX_COPIES copies, spent outermost first and on main ranges before tail ranges; a loop
whose action needs more copies than are left only drops the guards that hold on its whole range.
GPU kernels (any thread-bound loop) are left alone: a range split across a block's threads would
put barriers under divergent branches.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...te.expr import And, Binary, BinOp, CmpOp, Compare, Const, Expr, Select, Var
from ...te.traversal import substitute, transform, walk
from ..bounds import const_bound, direction, symbolic_bound
from ..functor import conjuncts, free_vars, structural_equal, uses_var
from ..nodes import Allocate, For, ForKind, IfThenElse, Let, Load, Seq, Stmt, Store, seq
from .simplify import Ranges, simplify, simplify_expr

MAX_COPIES = 4   # loop-body copies one root nest may gain: 4 covers a 2-D tile tail plus a reduction tail
_TRUE = Const(True, "bool")
_HOT = (ForKind.VECTORIZED, ForKind.UNROLLED)
_BOUNDS = (CmpOp.LT, CmpOp.LE, CmpOp.GT, CmpOp.GE)


@dataclass(frozen=True)
class _Guard:
    cond: Expr      # one conjunct, as it appears in the body (found again by identity)
    hoisted: Expr   # true => `cond` holds for every value of the loops between L and it
    deep: bool      # below a serial or unrolled loop of L's body, not only below a vector loop


def partition_loops(s: Stmt) -> Stmt:
    """Split (or version) loops so that their main range runs without tail guards."""
    if has_thread_loops(s):
        return s
    return simplify(split_loops(s))     # fold the guards replaced by true, and 1-iteration pieces


def split_loops(s: Stmt) -> Stmt:
    """The pass before folding: main ranges with their lifted guards replaced by true; head and
    tail pieces are loops named `<var>.head` / `<var>.tail`; versions are `if hoisted: main else:
    tail` (the only IfThenElse with an else before vectorize)."""
    return _visit(s, {}, None)


# -- traversal ---------------------------------------------------------------------------------
def _visit(s: Stmt, r: Ranges, budget: list[int] | None) -> Stmt:
    if type(s) is For and s.kind is ForKind.VECTORIZED:
        return s                        # its body becomes lanes: a branch there would scalarize it
    if type(s) is For:
        budget = [MAX_COPIES] if budget is None else budget    # a root nest starts its own count
        done = _partition(s, r, budget)
        return done if done is not None else _inside(s, r, budget)
    if type(s) is Seq:
        parts = tuple(_visit(x, r, budget) for x in s.stmts)
        return s if all(a is b for a, b in zip(parts, s.stmts)) else Seq(parts)
    if type(s) is IfThenElse:
        then = _visit(s.then_case, r, budget)
        other = None if s.else_case is None else _visit(s.else_case, r, budget)
        return s if then is s.then_case and other is s.else_case else IfThenElse(s.cond, then, other)
    if type(s) is Allocate:
        body = _visit(s.body, r, budget)
        return s if body is s.body else Allocate(s.buffer, body)
    if type(s) is Let:
        bound = const_bound(s.value, r)
        if bound is not None:
            r[s.var] = bound
        body = _visit(s.body, r, budget)
        r.pop(s.var, None)
        return s if body is s.body else Let(s.var, s.value, body)
    return s


def _inside(loop: For, r: Ranges, budget: list[int]) -> For:
    """`loop` with its body visited (not the loop itself: it was partitioned already, or not)."""
    r[loop.var] = (0, loop.extent - 1)
    body = _visit(loop.body, r, budget)
    del r[loop.var]
    return loop if body is loop.body else For(loop.var, loop.extent, loop.kind, body, loop.thread)


# -- one loop ------------------------------------------------------------------------------------
def _partition(loop: For, r: Ranges, budget: list[int]) -> Stmt | None:
    """The loop split into main and tail ranges and/or versioned, its pieces visited; None if
    no guard below it can be lifted."""
    if loop.kind not in (ForKind.SERIAL, ForKind.PARALLEL):
        return None
    n = loop.extent
    whole, spans, versioned = [], [], []
    for g in _guards(loop, r):
        span = None if loop.kind is ForKind.PARALLEL else _true_span(g.hoisted, loop, r)
        if span is None:
            if g.deep:
                versioned.append(g)
        elif span == (0, n):
            whole.append(g)
        elif span[0] < span[1]:
            spans.append((g, span))
        # an empty span: the guard fails somewhere below for every iteration; left to inner loops
    lo, hi, split = _main_range(spans, n)
    copies = (lo > 0) + (hi < n)
    if copies > budget[0]:
        lo, hi, split, copies = 0, n, [], 0
    if versioned and copies + 1 > budget[0]:
        versioned = []
    if not (whole or split or versioned):
        return None
    budget[0] -= copies + bool(versioned)
    body = _replace(loop.body, whole + split)
    if versioned:
        body = IfThenElse(_conjunction([g.hoisted for g in versioned]), _replace(body, versioned), _fresh(body))
    main = _inside(_range(loop, lo, hi, body, ""), r, budget)      # the hot range gets the budget first
    head = _inside(_range(loop, 0, lo, _fresh(loop.body), ".head"), r, budget) if lo > 0 else None
    tail = _inside(_range(loop, hi, n, _fresh(loop.body), ".tail"), r, budget) if hi < n else None
    return seq(head, main, tail)


def _range(loop: For, lo: int, hi: int, body: Stmt, suffix: str) -> For:
    """`loop` over [lo, hi) of its original range, with `body`; the main range keeps its variable."""
    if lo == 0 and not suffix:
        return For(loop.var, hi, loop.kind, body, loop.thread)
    v = Var(loop.var.name + suffix, loop.var.dtype)
    return For(v, hi - lo, loop.kind, substitute(body, {loop.var: v + lo}), loop.thread)


def _true_span(hoisted: Expr, loop: For, r: Ranges) -> tuple[int, int] | None:
    """[lo, hi): the iterations where `hoisted` holds, when it is monotone in the loop variable
    alone (a binary search on constants); None when it is not (the loop is versioned instead)."""
    v, n = loop.var, loop.extent
    if type(hoisted) is not Compare or hoisted.op not in _BOUNDS or any(x is not v for x in free_vars(hoisted)):
        return None
    if direction(Binary(BinOp.SUB, hoisted.a, hoisted.b), v) is None:
        return None

    def holds(i: int) -> bool:
        return _is_true(simplify_expr(substitute(hoisted, {v: Const(i, v.dtype)}), r))

    first, last = holds(0), holds(n - 1)
    if first == last:
        return (0, n) if first else (0, 0)
    a, b = 0, n - 1                    # holds(a) == first != holds(b)
    while b - a > 1:
        mid = (a + b) // 2
        a, b = (mid, b) if holds(mid) == first else (a, mid)
    return (0, b) if first else (b, n)


def _main_range(spans: list[tuple[_Guard, tuple[int, int]]], n: int) -> tuple[int, int, list[_Guard]]:
    """The widest range where as many guards as possible hold: intersect spans, widest first,
    while the intersection stays non-empty."""
    lo, hi, chosen = 0, n, []
    for g, (a, b) in sorted(spans, key=lambda x: x[1][0] - x[1][1]):
        if max(lo, a) < min(hi, b):
            lo, hi = max(lo, a), min(hi, b)
            chosen.append(g)
    return lo, hi, chosen


# -- guards below a loop ---------------------------------------------------------------------------
def _guards(loop: For, r: Ranges) -> list[_Guard]:
    """The conjuncts below `loop` that can be lifted to it, each with its hoisted condition.
    A conjunct seen twice must lift to the same condition each time, or it is not lifted."""
    ranges = {**r, loop.var: (0, loop.extent - 1)}
    relax: dict[Var, tuple[Expr, Expr]] = {}
    lets: set[Var] = set()
    found: dict[int, _Guard | None] = {}

    def consider(cond: Expr, hot: bool, deep: bool) -> None:
        for c in conjuncts(cond):
            g = _lift(c, loop.var, relax, lets, ranges, deep) if hot else None
            prev = found.get(id(c), g)
            same = prev is not None and g is not None and structural_equal(prev.hoisted, g.hoisted)
            found[id(c)] = g if same else None

    def visit(s: Stmt, hot: bool, deep: bool) -> None:
        if type(s) is For:
            relax[s.var] = (Const(0, s.var.dtype), Const(s.extent - 1, s.var.dtype))
            visit(s.body, hot or s.kind in _HOT, deep or s.kind is not ForKind.VECTORIZED)
            del relax[s.var]
        elif type(s) is IfThenElse:
            if s.else_case is None:
                consider(s.cond, hot or _has_hot_loop(s.then_case), deep)
            visit(s.then_case, hot, deep)
            if s.else_case is not None:
                visit(s.else_case, hot, deep)
        elif type(s) is Store:
            walk(s.value, lambda e: consider(e.cond, hot, deep) if type(e) is Select
                 else consider(e.predicate, hot, deep) if type(e) is Load and e.predicate is not None else None)
        elif type(s) is Let:
            lets.add(s.var)
            visit(s.body, hot, deep)
        elif isinstance(s, Seq):
            for x in s.stmts:
                visit(x, hot, deep)
        elif isinstance(s, Allocate):
            visit(s.body, hot, deep)

    visit(loop.body, False, False)
    return [g for g in found.values() if g is not None]


def _lift(c: Expr, v: Var, relax: dict, lets: set[Var], ranges: Ranges, deep: bool) -> _Guard | None:
    """`c` (a bound on an index) with the loops in `relax` at their worst values, if that still
    depends on `v`: true there means `c` holds for every value of those loops."""
    if type(c) is not Compare or c.op not in _BOUNDS or c.a.dtype not in ("int32", "int64") or c.lanes != 1:
        return None
    used = free_vars(c)
    if any(x in lets for x in used):
        return None                     # a let below L
    if not any(x in relax for x in used):   # L's own bound, tested per element of hot code
        return _Guard(c, c, deep) if uses_var(c, v) else None
    bound = symbolic_bound(Binary(BinOp.SUB, c.a, c.b), relax, _const_value)
    if bound is None:
        return None
    worst = bound[1] if c.op in (CmpOp.LT, CmpOp.LE) else bound[0]
    hoisted = simplify_expr(Compare(c.op, worst, Const(0, worst.dtype)), ranges)
    return _Guard(c, hoisted, deep) if uses_var(hoisted, v) else None


# -- helpers ---------------------------------------------------------------------------------------
def _const_value(e: Expr) -> int | None:
    out = simplify_expr(e)
    return out.value if type(out) is Const and isinstance(out.value, int) else None


def _is_true(e: Expr) -> bool:
    return type(e) is Const and e.value is True



def _conjunction(conds: list[Expr]) -> Expr:
    unique: list[Expr] = []
    for c in conds:
        if not any(structural_equal(c, u) for u in unique):
            unique.append(c)
    out = unique[0]
    for c in unique[1:]:
        out = And(out, c)
    return out


def _replace(s: Stmt, guards: list[_Guard]) -> Stmt:
    """`s` with each guard's conjunct (by identity) replaced by true."""
    ids = {id(g.cond): g.cond for g in guards}
    return transform(s, lambda n: None, pre=lambda n: _TRUE if ids.get(id(n)) is n else None) if ids else s


def _fresh(s: Stmt) -> Stmt:
    """`s` with every loop and let variable it binds renamed, so that each variable of the
    function stays bound once (guards are matched by identity across copies)."""
    names: dict[Var, Var] = {}
    walk(s, lambda n: names.setdefault(n.var, Var(n.var.name, n.var.dtype)) if isinstance(n, (For, Let)) else None)
    return substitute(s, names)


def _has_hot_loop(s: Stmt) -> bool:
    found = []
    walk(s, lambda n: found.append(n) if isinstance(n, For) and n.kind in _HOT else None)
    return bool(found)


def has_thread_loops(s: Stmt) -> bool:
    """Whether `s` is a GPU kernel: a branch across a block's threads would put the barriers
    inserted after lowering under divergent control flow."""
    found = []
    walk(s, lambda n: found.append(n) if isinstance(n, For) and n.kind is ForKind.THREAD_BOUND else None)
    return bool(found)
