"""How often each branch of a guard runs: the share of its loop nest's iterations that reach it.

Counting both branches of every guard in full makes a versioned nest's tail copy weigh as much
as its main copy, and a `j < 61` tail guard as much as the loop it trims. Loops start at 0 and
have constant extents, so the iteration space of a nest is a box: a fixed set of `SAMPLES`
points is drawn from it, one stratified column per loop variable (drawn when a condition first
reads it: variables are independent), and every branch carries the mask of the points that reach
it. A condition is evaluated on those points with numpy; one that reads memory, a float or a
variable bound outside the function is taken to hold on a fixed half of them.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..te.expr import And, Binary, BinOp, Cast, CmpOp, Compare, Const, Expr, Not, Or, Select, Var

SAMPLES = 128

Mask = np.ndarray       # bool, SAMPLES points; which points reach a statement

_BINARY: dict[BinOp, Callable[[Any, Any], Any]] = {
    BinOp.ADD: np.add, BinOp.SUB: np.subtract, BinOp.MUL: np.multiply,
    BinOp.FLOORDIV: np.floor_divide, BinOp.FLOORMOD: np.mod, BinOp.MIN: np.minimum, BinOp.MAX: np.maximum}
_COMPARE: dict[CmpOp, Callable[[Any, Any], Any]] = {
    CmpOp.LT: np.less, CmpOp.LE: np.less_equal, CmpOp.GT: np.greater, CmpOp.GE: np.greater_equal,
    CmpOp.EQ: np.equal, CmpOp.NE: np.not_equal}


class _Unknown(Exception):
    """The condition cannot be evaluated from loop variables alone."""


class Branches:
    """The sample points of one function and the masks of its guards (memoised by node)."""

    def __init__(self) -> None:
        self.extent: dict[Var, int] = {}     # loop variables seen so far
        self.lets: dict[Var, Expr] = {}
        self._cols: dict[Var, np.ndarray] = {}
        self._holds: dict[int, tuple[Expr, Mask]] = {}
        self._rng = np.random.default_rng(0)  # fixed: the same IR always gives the same features
        self._coin: Mask | None = None

    def split(self, cond: Expr, mask: Mask | None) -> tuple[Mask, Mask]:
        """The masks of the then and else branches of `if cond` reached by `mask` (None: all)."""
        holds = self.holds(cond)
        if mask is None:
            return holds, ~holds
        return mask & holds, mask & ~holds

    def holds(self, cond: Expr) -> Mask:
        hit = self._holds.get(id(cond))
        if hit is None:
            try:
                value = np.broadcast_to(np.asarray(self._eval(cond), dtype=bool), (SAMPLES,))
            except _Unknown:
                value = self._half()
            hit = self._holds[id(cond)] = (cond, value)   # the node is kept: its id stays unique
        return hit[1]

    def _half(self) -> Mask:
        if self._coin is None:
            self._coin = self._rng.permutation(SAMPLES) < SAMPLES // 2
        return self._coin

    def _column(self, v: Var) -> np.ndarray:
        col = self._cols.get(v)
        if col is None:
            if v in self.extent:        # stratified: every value of a short loop equally often
                n = self.extent[v]
                col = self._rng.permutation(np.arange(SAMPLES, dtype=np.int64) * n // SAMPLES)
            elif v in self.lets:
                col = np.broadcast_to(np.asarray(self._eval(self.lets[v])), (SAMPLES,))
            else:
                raise _Unknown(v.name)
            self._cols[v] = col
        return col

    def _eval(self, e: Any) -> Any:
        t = type(e)
        if t is Var:
            return self._column(e)
        if t is Const:
            if isinstance(e.value, float):
                raise _Unknown("float")
            return e.value
        if t is Binary and e.op in _BINARY:
            a, b = self._eval(e.a), self._eval(e.b)
            if e.op in (BinOp.FLOORDIV, BinOp.FLOORMOD) and np.any(np.asarray(b) == 0):
                raise _Unknown("division by zero")
            return _BINARY[e.op](a, b)
        if t is Compare:
            return _COMPARE[e.op](self._eval(e.a), self._eval(e.b))
        if t is And or t is Or:
            return (np.logical_and if t is And else np.logical_or)(self._eval(e.a), self._eval(e.b))
        if t is Not:
            return np.logical_not(self._eval(e.a))
        if t is Select:
            return np.where(self._eval(e.cond), self._eval(e.t), self._eval(e.f))
        if t is Cast and (e.dtype == "bool" or e.dtype.startswith(("int", "uint"))):
            return self._eval(e.value)
        raise _Unknown(t.__name__)      # loads, calls, float arithmetic, vectors
