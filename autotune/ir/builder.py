"""Write loop IR imperatively (TVM's tir.ir_builder): the bodies of `te.extern` operations.

    ib = IRBuilder()
    with ib.loop(n, "i", kind="vectorize") as i:
        ib.store(out, [i], ib.load(x, [i]) * 2.0)
    stmt = ib.get()

Loops, allocations and branches are context managers; statements emitted inside one become its
body. Indices are given per dimension and flattened row-major, as lowering does for computes.
The result goes through the same passes as lowered schedules (simplify, vectorize, unroll,
verify), so loop kinds mean what they mean in a schedule.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ..dtype import dtype_info
from ..te.expr import Const, Expr, Var, as_bool, as_expr
from .nodes import Allocate, Buffer, For, ForKind, IfThenElse, Load, Stmt, Store, seq

LOOP_KINDS = {"serial": ForKind.SERIAL, "parallel": ForKind.PARALLEL, "vectorize": ForKind.VECTORIZED,
              "unroll": ForKind.UNROLLED}


def flat_index(shape: Sequence[int], indices: Sequence[Any]) -> Expr:
    """The row-major offset of `indices` in a buffer of `shape`."""
    if len(indices) != len(shape):
        raise IndexError(f"buffer of shape {tuple(shape)} indexed with {len(indices)} indices")
    index: Expr = Const(0, "int32")
    for n, i in zip(shape, indices):
        index = index * n + as_expr(i)
    return index


class IRBuilder:
    """Collects statements into nested scopes; `get()` returns the whole statement."""

    def __init__(self) -> None:
        self._scopes: list[list[Stmt]] = [[]]

    def emit(self, stmt: Stmt) -> None:
        self._scopes[-1].append(stmt)

    @contextmanager
    def _scope(self) -> Iterator[list[Stmt]]:
        self._scopes.append([])
        try:
            yield self._scopes[-1]
        finally:
            self._scopes.pop()

    @staticmethod
    def _body(stmts: list[Stmt]) -> Stmt:
        if not stmts:
            raise ValueError("IRBuilder: a loop, allocation or branch has an empty body")
        return seq(*stmts)

    @contextmanager
    def loop(self, extent: int, name: str = "i", kind: str = "serial") -> Iterator[Var]:
        """`for var in range(extent)`; kind is "serial", "parallel", "vectorize" or "unroll"."""
        if isinstance(extent, bool) or not isinstance(extent, int) or extent < 1:
            raise ValueError(f"IRBuilder.loop {name}: extent must be an int >= 1, got {extent!r}")
        if kind not in LOOP_KINDS:
            raise ValueError(f"IRBuilder.loop {name}: kind must be one of {sorted(LOOP_KINDS)}, got {kind!r}")
        var = Var(name)
        with self._scope() as body:
            yield var
        self.emit(For(var, extent, LOOP_KINDS[kind], self._body(body)))

    @contextmanager
    def allocate(self, name: str, shape: Sequence[int], dtype: str, scope: str = "local") -> Iterator[Buffer]:
        """A buffer live for the statements emitted inside the block."""
        dtype_info(dtype)
        buf = Buffer(name, tuple(shape), dtype, scope)
        with self._scope() as body:
            yield buf
        self.emit(Allocate(buf, self._body(body)))

    @contextmanager
    def if_scope(self, cond: Any) -> Iterator[None]:
        """Statements run only where `cond` holds."""
        c = as_bool(cond)
        with self._scope() as body:
            yield
        self.emit(IfThenElse(c, self._body(body)))

    @contextmanager
    def else_scope(self) -> Iterator[None]:
        """The else branch of the `if_scope` just closed."""
        last = self._scopes[-1][-1] if self._scopes[-1] else None
        if not isinstance(last, IfThenElse) or last.else_case is not None:
            raise ValueError("IRBuilder.else_scope must directly follow an if_scope")
        with self._scope() as body:
            yield
        self._scopes[-1][-1] = IfThenElse(last.cond, last.then_case, self._body(body))

    @staticmethod
    def load(buf: Buffer, indices: Sequence[Any]) -> Load:
        return Load(buf, flat_index(buf.shape, indices))

    def store(self, buf: Buffer, indices: Sequence[Any], value: Any) -> None:
        v = as_expr(value, buf.dtype)
        if v.dtype != buf.dtype:
            raise TypeError(f"IRBuilder.store to {buf.name}: value has dtype {v.dtype}, buffer {buf.dtype}")
        self.emit(Store(buf, flat_index(buf.shape, indices), v))

    def get(self) -> Stmt:
        if len(self._scopes) != 1:
            raise ValueError("IRBuilder.get inside an open loop, allocation or branch")
        return self._body(self._scopes[0])
