"""Unswitch selects whose condition a loop's body cannot change (loop unswitching, on selects).

A concat is a chain of selects on one axis (`c < 64 ? x0 : c < 96 ? x1 : x2`); fused with the
other axes into the parallel loop, no partition range isolates a part, and every vector of the
inner loop paid a masked load from each input and a blend of them (three 64-channel inputs of
57 x 57: 0.15-0.6x onnxruntime). Its conditions read only the row loop's variable, so for each
row they are constants: tested once at the top of the row's body, each branch keeps only the
part it reads.

For a loop L (not a vector loop), a condition of a select in a loop of L's body is unswitched when it reads
L's variable and no variable bound inside L's body: L's body becomes `if cond: body[cond := true]
else: body[cond := false]`, simplified, and each branch is unswitched again. A branch must come
out smaller than the body (the resolved select dropped an arm), and a body of m such conditions
gets at most m + 1 branches and at most twice its size: a chain of k parts becomes k branches
of one load each, while m independent conditions would copy the body 2^m times.
Conditions are matched by structure (the same test appears in a select and in its arms' load
predicates, negated in some). Runs after partition: the conditions it leaves in place are the
ones no range split could lift.
"""
from __future__ import annotations

from typing import Any

from ...te.expr import Const, Expr, Node, Not, Select, Var
from ...te.traversal import field_names, transform, walk
from ..functor import conjuncts, free_vars
from ..nodes import For, ForKind, IfThenElse, Let, Load, Stmt
from .partition import has_thread_loops
from .simplify import simplify

_TRUE, _FALSE = Const(True, "bool"), Const(False, "bool")
MAX_GROWTH = 2     # one condition's two branches, each smaller than the body, always fit


def unswitch_selects(s: Stmt) -> Stmt:
    """Every loop's body split on the select conditions it cannot change, outermost loops first;
    GPU kernels are left alone, as partition leaves them."""
    if has_thread_loops(s):
        return s
    # only loops whose variable some condition reads can gain a branch (most kernels have none)
    read: set[Var] = set().union(*(free_vars(c) for c in _select_conditions(s)))
    return _unswitch_loops(s, read) if read else s


def _unswitch_loops(s: Stmt, read: set[Var]) -> Stmt:
    def pre(n: object) -> Stmt | None:
        if type(n) is For and n.kind is not ForKind.VECTORIZED and n.var in read:
            body = _unswitch_loops(_unswitched(n.body, n.var), read)
            return n if body is n.body else For(n.var, n.extent, n.kind, body, n.thread)
        return None
    return transform(s, lambda n: None, pre=pre)


def _unswitched(body: Stmt, var: Var) -> Stmt:
    """`body` branched on its invariant conditions of `var`, one more branch per condition, if
    that leaves it at most MAX_GROWTH times its size."""
    conditions = _invariant(body, var)
    if not conditions:          # most loops of most kernels: nothing to branch on, no walk more
        return body
    out = _branched(body, var, [len(conditions)])
    return out if out is not body and _size(out) <= MAX_GROWTH * _size(body) else body


def _branched(body: Stmt, var: Var, budget: list[int]) -> Stmt:
    for cond in _invariant(body, var) if budget[0] > 0 else ():
        then, other = simplify(_resolve(body, cond, _TRUE)), simplify(_resolve(body, cond, _FALSE))
        if max(_size(then), _size(other)) < _size(body):
            budget[0] -= 1
            return IfThenElse(cond, _branched(then, var, budget), _branched(other, var, budget))
    return body


def _invariant(body: Stmt, var: Var) -> list[Expr]:
    """The select conditions in `body` that read `var` and nothing bound inside `body`."""
    found = [c for c in _select_conditions(body) if var in free_vars(c)]
    bound = _bound_inside(body) if found else set()
    return [c for c in found if not free_vars(c) & bound]


def _select_conditions(body: Stmt) -> list[Expr]:
    """The conjuncts of the conditions of selects between two reads (a concat's parts, not a
    padding's value or zero, which partition handles) inside loops of `body` (evaluated more
    than once per iteration of the loop around it), without structural repeats, in order."""
    found: list[Expr] = []

    def visit(n: object) -> None:
        if type(n) is Select and n.cond.lanes == 1 and _reads(n.t) and _reads(n.f):
            for c in conjuncts(n.cond):
                c = c.a if type(c) is Not else c
                if type(c) is not Const and not any(_same(c, f) for f in found):
                    found.append(c)
    for loop in _outer_loops(body):
        walk(loop, visit)
    return found


def _outer_loops(body: Stmt) -> list[For]:
    """The loops of `body` that no other loop of `body` encloses."""
    loops: list[For] = []

    def take(n: Node) -> Node | None:
        if type(n) is For:
            loops.append(n)
            return n                    # not visited further
        return None
    transform(body, lambda n: None, pre=take)
    return loops


def _resolve(body: Stmt, cond: Expr, value: Const) -> Stmt:
    """`body` with every occurrence of `cond` (by structure) replaced by `value`."""
    return transform(body, lambda n: None, pre=lambda n: value if isinstance(n, Expr) and _same(n, cond) else None)


def _same(a: Any, b: Any) -> bool:
    """Structurally equal, each variable only to itself."""
    if type(a) is not type(b):
        return False
    if isinstance(a, Var):
        return a is b
    if isinstance(a, tuple):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, Node):
        return all(_same(getattr(a, f), getattr(b, f)) for f in field_names(type(a)))
    return bool(a == b)


def _reads(e: Expr) -> bool:
    found: list[Load] = []
    walk(e, lambda n: found.append(n) if type(n) is Load else None)
    return bool(found)


def _bound_inside(body: Stmt) -> set[Var]:
    names: set[Var] = set()
    walk(body, lambda n: names.add(n.var) if isinstance(n, (For, Let)) else None)
    return names



def _size(s: Stmt) -> int:
    count = [0]

    def visit(_: object) -> None:
        count[0] += 1
    walk(s, visit)
    return count[0]
