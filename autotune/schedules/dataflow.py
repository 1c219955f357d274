"""Dataflow rewrites of a schedule: cache_write and cache_read add a stage and re-route reads.

As in TVM, the rewritten stages keep their IterVars, so handles users already hold (`C.op.axis`
after `cache_write(C)`, a reader's axes after `cache_read`) keep addressing the same stages.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ScheduleError, check
from ..te.expr import IterVar, Reduce, TensorLoad, Var
from ..te.tensor import ComputeOp, Tensor
from ..te.traversal import substitute, transform
from .schedule import Schedule, Stage

SCOPES = ("global", "local", "shared")


def check_scope(scope: str, where: str) -> None:
    check(scope in SCOPES, f"{where}: unknown scope {scope!r}; expected one of {SCOPES}")


def _fresh(iv: IterVar) -> IterVar:
    return IterVar(Var(iv.var.name), iv.dom_min, iv.extent, iv.kind)


def cache_write(s: Schedule, tensor: Tensor, scope: str) -> Tensor:
    """Compute `tensor` into a new cache stage; the original stage then copies the cache out."""
    where = f"cache_write of {tensor.name}"
    check_scope(scope, where)
    stage = s[tensor]
    check(isinstance(stage.op, ComputeOp), f"{where}: only a compute can be cached")
    check(not stage.relations and not stage.iter_attrs,
          f"{where}: call cache_write before splitting, fusing or annotating {tensor.name}")
    op: ComputeOp = stage.op  # type: ignore[assignment]
    axis = tuple(_fresh(iv) for iv in op.axis)
    raxis = tuple(_fresh(iv) for iv in op.reduce_axis)
    vmap = {o.var: n.var for o, n in zip(op.axis + op.reduce_axis, axis + raxis)}
    body = substitute(op.body, vmap)
    if isinstance(body, Reduce):
        body = Reduce(body.combiner, body.source, raxis, body.condition)
    cache_op = ComputeOp(f"{op.name}.{scope}", axis, body)
    cache = Stage(cache_op, s, scope)
    s.add_stage(cache, s.stages.index(stage))
    copy = ComputeOp(op.name, op.axis, cache_op.output(0)(*(iv.var for iv in op.axis)), tag=op.tag)
    s.register_op(stage, copy)
    stage.reset_axes()
    return cache_op.output(0)


def _reader_stage(s: Schedule, r: Any) -> Stage:
    if isinstance(r, Stage):
        return r
    return s[r]


def cache_read(s: Schedule, tensor: Tensor, scope: str, readers: Sequence[Any]) -> Tensor:
    """Copy `tensor` into a new stage read by `readers` instead of the original."""
    where = f"cache_read of {tensor.name}"
    check_scope(scope, where)
    producer = s[tensor]
    stages = [_reader_stage(s, r) for r in (readers if isinstance(readers, (list, tuple)) else [readers])]
    check(stages, f"{where}: needs at least one reader")
    axis = tuple(IterVar(Var(f"ax{d}"), 0, n, "data") for d, n in enumerate(tensor.shape))
    cache_op = ComputeOp(f"{tensor.name}.{scope}", axis, tensor(*(iv.var for iv in axis)))
    cache_tensor = cache_op.output(0)
    for st in stages:
        if not any(s[t] is producer for t in st.op.input_tensors if t in s):
            raise ScheduleError(f"{where}: {st.name} does not read {tensor.name}")
        check(isinstance(st.op, ComputeOp), f"{where}: reader {st.name} is not a compute (an extern op reads "
                                            "its inputs' buffers directly)")
        old: ComputeOp = st.op  # type: ignore[assignment]
        body = transform(old.body, lambda n: TensorLoad(cache_tensor, n.indices)
                         if isinstance(n, TensorLoad) and s[n.tensor] is producer else None)
        s.register_op(st, ComputeOp(old.name, old.axis, body, tag=old.tag))
    first = min(s.stages.index(st) for st in stages)
    s.add_stage(Stage(cache_op, s, scope), first)
    return cache_tensor
