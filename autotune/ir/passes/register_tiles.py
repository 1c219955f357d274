"""Register tiles without masks: a vector tail's masked-off lanes may compute anything into a
local buffer that only its own lanes read.

A vectorized loop's masked tail (`vectorize._masked_tail`) puts the tail guard on every load and
store under it, a local tile's too. LLVM keeps a local tile in registers only through plain
loads and stores; masked ones leave it in memory, so a tile whose columns cross the layer's edge
accumulated through the stack (a depthwise 7x7 conv 29 columns wide, tiles of 16 and 13: half
the rate of a 30-wide one). Where every access to a local buffer carries the same mask over
whole aligned vectors of the same width, and the mask cannot change while the buffer lives, an
element is only ever touched by one lane, and a lane the mask turns off never reaches memory
outside the buffer: its accesses to the buffer can drop the mask. Other memory keeps its masks.
"""
from __future__ import annotations

from ...te.expr import Const, Expr, Var
from ...te.traversal import transform, walk
from ..bounds import Interval, const_bound
from ..functor import free_vars, structural_equal
from ..nodes import Allocate, For, Let, Load, Ramp, Stmt, Store
from .simplify import linear


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
    """Every access to the buffer is masked by one predicate that reads no variable bound while
    the buffer lives, through a ramp of stride 1 whose first element is a multiple of its lanes
    and whose last is inside the buffer."""
    accesses: list[Load | Store] = []
    ranges: dict[Var, Interval] = {}
    bound_inside: set[Var] = set()

    def visit(n: object) -> None:
        if isinstance(n, (Load, Store)) and n.buffer is alloc.buffer:
            accesses.append(n)
        elif type(n) is For:
            ranges[n.var] = (0, n.extent - 1)
            bound_inside.add(n.var)
        elif type(n) is Let:
            bound_inside.add(n.var)

    walk(alloc.body, visit)
    if not accesses:
        return False
    first = accesses[0].predicate
    if first is None or free_vars(first) & bound_inside:
        return False
    size = 1
    for d in alloc.buffer.shape:
        size *= d
    lanes = accesses[0].index.lanes
    for a in accesses:
        if a.predicate is None or not structural_equal(a.predicate, first):
            return False
        idx = a.index
        if type(idx) is not Ramp or idx.lanes != lanes or not (type(idx.stride) is Const and idx.stride.value == 1):
            return False
        terms, c0 = linear(idx.base)
        if c0 % lanes or any(k % lanes for _, k in terms.values()):
            return False
        span = const_bound(idx.base, ranges)
        if span is None or span[0] < 0 or span[1] + lanes > size:
            return False
    return size % lanes == 0
