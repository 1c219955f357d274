"""Register tiles without masks: a vector tail's masked-off lanes may compute anything into a
local buffer that only its own lanes read.

A vectorized loop's masked tail (`vectorize._masked_tail`) puts the tail guard on every load and
store under it, a local tile's too. LLVM keeps a local tile in registers only through plain
loads and stores; masked ones leave it in memory, so a tile whose columns cross the layer's edge
accumulated through the stack (a depthwise 7x7 conv 29 columns wide, tiles of 16 and 13: half
the rate of a 30-wide one). Where the accesses to a local buffer go over whole aligned vectors
of the same width, and every access that can touch an element carries the same mask, which
cannot change while the buffer lives, an element is only ever touched by one lane, and a lane
the mask turns off never reaches memory outside the buffer: its accesses to the buffer can drop
the mask. The vectors of a tile may carry different masks (one inside the edge, one across it).
Other memory keeps its masks. Unmasked accesses may be mixed in where they run only when every
lane is on: a vector loop versioned per vector (its full-vector copy under a test of the last
lane) inside a row tail.
"""
from __future__ import annotations

import math
from typing import Any, cast

from ...te.expr import Binary, BinOp, CmpOp, Compare, Const, Expr, Var
from ...te.traversal import transform, walk
from ..bounds import Interval, const_bound
from ..functor import conjuncts, free_vars, structural_equal
from ..nodes import Allocate, Broadcast, Buffer, For, IfThenElse, Let, Load, Ramp, Seq, Stmt, Store
from .simplify import linear, simplify_expr


def unmask_register_tiles(s: Stmt) -> Stmt:
    """Drop the masks of the accesses to each local buffer that `_one_lane_per_element` allows."""
    def post(n: object) -> Stmt | None:
        if type(n) is Allocate and n.buffer.scope == "local" and _one_lane_per_element(n):
            return Allocate(n.buffer, transform(n.body, lambda x: _unmasked(x, n)))
        return None

    return transform(s, post)


def _unmasked(node: object, alloc: Allocate) -> Stmt | Expr | None:
    if type(node) is Store and node.buffer is alloc.buffer:
        return Store(node.buffer, node.index, node.value)
    if type(node) is Load and node.buffer is alloc.buffer:
        return Load(node.buffer, node.index)
    return None


def _one_lane_per_element(alloc: Allocate) -> bool:
    """Every access to the buffer goes through a ramp of stride 1 whose first element is a
    multiple of its lanes and whose last is inside the buffer; the accesses that can touch the
    same elements (`_same_elements`) are masked by one predicate P that reads no variable bound
    while the buffer lives, or run only where P has every lane on (under a branch one of whose
    conditions is P's last lane: the full-vector version of a versioned vector loop)."""
    ranges: dict[Var, Interval] = {}
    bound_inside: set[Var] = set()
    accesses: list[tuple[Load | Store, tuple[Expr, ...]]] = []
    _collect(alloc.body, alloc.buffer, (), accesses, ranges, bound_inside)
    if all(a.predicate is None for a, _ in accesses):
        return False
    size = math.prod(alloc.buffer.shape)
    lanes = accesses[0][0].index.lanes
    for a, _ in accesses:
        idx = a.index
        if type(idx) is not Ramp or idx.lanes != lanes or not (type(idx.stride) is Const and idx.stride.value == 1):
            return False
        terms, c0 = linear(idx.base)
        if c0 % lanes or any(k % lanes for _, k in terms.values()):
            return False
        span = const_bound(idx.base, ranges)
        if span is None or span[0] < 0 or span[1] + lanes > size:
            return False
    return size % lanes == 0 and all(_one_mask(group, bound_inside) for group in _same_elements(accesses))


def _same_elements(accesses: list[tuple[Load | Store, tuple[Expr, ...]]]) -> list[list]:
    """The accesses grouped so that two in different groups never touch the same element: by
    their offset modulo the gcd of every variable's stride (the vectors of an unrolled tile, one
    inside a tail's edge and one across it, carry different masks)."""
    offsets = [linear(cast(Ramp, a.index).base) for a, _ in accesses]
    step = math.gcd(*(k for terms, _ in offsets for _, k in terms.values()))
    groups: dict[int | float, list] = {}
    for access, (_, c0) in zip(accesses, offsets):
        groups.setdefault(c0 % step if step else c0, []).append(access)
    return list(groups.values())


def _one_mask(group: list[tuple[Load | Store, tuple[Expr, ...]]], bound_inside: set[Var]) -> bool:
    """Whether a group's accesses share one mask, or run where it has every lane on."""
    masks = [a.predicate for a, _ in group if a.predicate is not None]
    if not masks:
        return True
    if free_vars(masks[0]) & bound_inside:
        return False
    every_lane = _every_lane_on(masks[0])
    for a, guards in group:
        if a.predicate is None:
            if every_lane is None or not any(structural_equal(every_lane, c) for g in guards for c in conjuncts(g)):
                return False
        elif not structural_equal(a.predicate, masks[0]):
            return False
    return True


def _collect(s: Stmt, buf: Buffer, guards: tuple[Expr, ...], out: list, ranges: dict[Var, Interval],
             bound_inside: set[Var]) -> None:
    """The accesses to `buf` under `s`, each with the conditions of the branches it runs in."""
    def accesses_in(node: Any) -> None:
        walk(node, lambda n: out.append((n, guards)) if isinstance(n, (Load, Store)) and n.buffer is buf else None)

    if type(s) is For:
        ranges[s.var] = (0, s.extent - 1)
        bound_inside.add(s.var)
        _collect(s.body, buf, guards, out, ranges, bound_inside)
    elif type(s) is Let:
        bound_inside.add(s.var)
        accesses_in(s.value)
        _collect(s.body, buf, guards, out, ranges, bound_inside)
    elif type(s) is IfThenElse:
        accesses_in(s.cond)
        _collect(s.then_case, buf, (*guards, s.cond), out, ranges, bound_inside)
        if s.else_case is not None:
            _collect(s.else_case, buf, guards, out, ranges, bound_inside)
    elif type(s) is Seq:
        for x in s.stmts:
            _collect(x, buf, guards, out, ranges, bound_inside)
    elif type(s) is Allocate:
        _collect(s.body, buf, guards, out, ranges, bound_inside)
    else:       # a store or another leaf statement: its accesses, with these branches
        accesses_in(s)


def _every_lane_on(mask: Expr) -> Expr | None:
    """For a mask `ramp(b, s, n) < B` (s >= 0), the scalar condition that all its lanes hold:
    b + (n - 1) * s < B, simplified as the code it would be compared with is; else None."""
    if not (type(mask) is Compare and mask.op is CmpOp.LT and type(mask.a) is Ramp and type(mask.b) is Broadcast):
        return None
    ramp = mask.a
    if not (type(ramp.stride) is Const and ramp.stride.value >= 0):
        return None
    last = Binary(BinOp.ADD, ramp.base, Const((ramp.lanes - 1) * ramp.stride.value, ramp.base.dtype))
    return simplify_expr(Compare(CmpOp.LT, last, mask.b.value))

