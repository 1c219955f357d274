"""The loop-IR verifier: one table of invariants, checked at the end of lowering."""
from __future__ import annotations

from collections.abc import Callable

from ...errors import BuildError, ScheduleError
from ...te.expr import Binary, Compare, Reduce, Select, TensorLoad, Var
from ..functor import children
from ..nodes import Allocate, For, ForKind, Let, Load, Prefetch, PrimFunc, Store


def _no_te_nodes(node, ctx) -> str | None:
    if isinstance(node, (TensorLoad, Reduce)):
        return f"te node {node} survived lowering"
    return None


def _loops_lowered(node, ctx) -> str | None:
    if isinstance(node, For) and node.kind in (ForKind.VECTORIZED, ForKind.UNROLLED):
        return f"loop {node.var.name} is still {node.kind.value} after lowering"
    if isinstance(node, For) and node.extent < 1:
        return f"loop {node.var.name} has extent {node.extent}"
    return None


def _vars_bound(node, ctx) -> str | None:
    if isinstance(node, Var) and node not in ctx["bound"]:
        return f"variable {node.name} is used outside the loop or let that binds it"
    return None


def _buffers_in_scope(node, ctx) -> str | None:
    if isinstance(node, (Load, Store, Prefetch)) and node.buffer not in ctx["buffers"]:
        return f"buffer {node.buffer.name} is accessed outside its allocation"
    return None


def _lanes_agree(node, ctx) -> str | None:
    if isinstance(node, (Binary, Compare)) and node.a.lanes != node.b.lanes:
        return f"operands of {node} have {node.a.lanes} and {node.b.lanes} lanes"
    if isinstance(node, Select) and not (node.cond.lanes == node.t.lanes == node.f.lanes or node.cond.lanes == 1):
        return f"select {node} mixes lane counts"
    if isinstance(node, Store) and node.index.lanes != node.value.lanes:
        return f"store to {node.buffer.name} writes {node.value.lanes} lanes at {node.index.lanes} indices"
    if isinstance(node, Prefetch) and node.index.lanes != 1:
        return f"prefetch of {node.buffer.name} has a {node.index.lanes}-lane index"
    return None


CHECKS: list[Callable] = [_no_te_nodes, _loops_lowered, _vars_bound, _buffers_in_scope, _lanes_agree]


def _visit(node, ctx) -> None:
    for check in CHECKS:
        msg = check(node, ctx)
        if msg is not None:
            raise BuildError(f"invalid loop IR in {ctx['name']}: {msg}")
    if isinstance(node, For):
        if node.kind is ForKind.PARALLEL and ctx["parallel"]:
            raise ScheduleError(f"{ctx['name']}: parallel loop {node.var.name} is nested in parallel loop "
                                f"{ctx['parallel'][-1]}; parallelize one level only")
        ctx["bound"].add(node.var)
        if node.kind is ForKind.PARALLEL:
            ctx["parallel"].append(node.var.name)
        _visit(node.body, ctx)
        if node.kind is ForKind.PARALLEL:
            ctx["parallel"].pop()
        ctx["bound"].discard(node.var)
        return
    if isinstance(node, Let):
        _visit(node.value, ctx)
        ctx["bound"].add(node.var)
        _visit(node.body, ctx)
        ctx["bound"].discard(node.var)
        return
    if isinstance(node, Allocate):
        ctx["buffers"].add(node.buffer)
        _visit(node.body, ctx)
        ctx["buffers"].discard(node.buffer)
        return
    for c in children(node):
        _visit(c, ctx)


def verify(func: PrimFunc) -> PrimFunc:
    """Raise BuildError (ScheduleError for nested parallel loops) on the first broken invariant."""
    ctx = {"name": func.name, "bound": set(), "buffers": set(func.params), "parallel": []}
    _visit(func.body, ctx)
    return func
