"""Legality of `Stage.store_in`: a stage whose values live in an output's buffer.

The output overwrites the stage's values in place, so every read of a value must come before
the output's store to its element, and the stage must never write an element that another
iteration of the output's loops owns (already written, or being written by another thread):

- the output is at root, read by nothing, not a reduction, and reads the stage only at its own
  index (its store to an element follows its read of that element, and of no other);
- the stage is attached at one of the output's loops, and every other stage that reads it is
  attached at that same loop (it runs before the output's body there, not interleaved with it);
- each root axis of the output runs wholly outside that loop (the stage then covers the one
  index the output is at) or wholly inside it (that iteration writes the whole axis);
- no loop is bound to GPU threads (the threads' order would need barriers).
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..schedules.schedule import Fuse, Schedule, Split, Stage
from ..te.expr import Binary, BinOp, Const, Expr, IterVar, Reduce, TensorLoad, Var
from ..te.traversal import walk
from .infer_bound import BoundInference
from .passes.simplify import simplify_expr


def check_store_in(schedule: Schedule, bounds: BoundInference, st: Stage) -> None:
    """Raise ScheduleError naming the broken rule (module docstring) unless `st`'s values may
    live in the buffer of `st.storage`."""
    out = st.storage
    assert out is not None   # only stages with store_in are checked
    where = f"store_in of {st.name} in {out.name}"
    if st.attach != "scope" or st.attach_stage is not out:
        raise ScheduleError(f"{where}: {st.name} must be computed at a loop of {out.name} (compute_at)")
    if out.attach != "root" or schedule.readers(out):
        raise ScheduleError(f"{where}: {out.name} must be at root and read by no other stage")
    if st.scope != "global":
        raise ScheduleError(f"{where}: {st.name} has scope {st.scope}; its storage is {out.name}'s")
    if any(s.attr_of(iv).kind == "bind" for s in (st, out) for iv in s.leaf_iter_vars):
        raise ScheduleError(f"{where}: a loop is bound to GPU threads; store_in is for CPU schedules")
    body = bounds.body(out)
    if isinstance(body, Reduce):
        raise ScheduleError(f"{where}: {out.name} is a reduction, which reads {st.name} after its first store")
    _check_reads_at_own_index(body, st, out, where)
    _check_other_readers(schedule, bounds, st, where)
    _check_axes(bounds, st, out, where)


def _reads_of(schedule: Schedule, body: Expr, st: Stage) -> list[TensorLoad]:
    found: list[TensorLoad] = []
    walk(body, lambda n: found.append(n) if isinstance(n, TensorLoad) and n.tensor in schedule
         and schedule[n.tensor] is st else None)
    return found


def _check_reads_at_own_index(body: Expr, st: Stage, out: Stage, where: str) -> None:
    own = [iv.var for iv in out.op.axis]
    for load in _reads_of(st.schedule, body, st):
        if not all(isinstance(i, Var) and i is v for i, v in zip(load.indices, own)):
            raise ScheduleError(f"{where}: {out.name} reads {st.name} at an index other than its own "
                                f"({', '.join(v.name for v in own)}); it would read values already overwritten")


def _check_other_readers(schedule: Schedule, bounds: BoundInference, st: Stage, where: str) -> None:
    loop = f"{st.storage.name}.{st.attach_ivar.name}" if st.storage is not None and st.attach_ivar is not None else ""
    for reader in schedule.stages:
        if reader is st.storage or id(reader) not in bounds.bodies:
            continue
        if _reads_of(schedule, bounds.body(reader), st) and (
                reader.attach_stage is not st.attach_stage or reader.attach_ivar is not st.attach_ivar):
            raise ScheduleError(f"{where}: {reader.name} also reads {st.name}; compute it at the same loop "
                                f"({loop}), before the output's stores")


def _descendants(stage: Stage, root: IterVar) -> set[IterVar]:
    """The leaf axes that `root` was split or fused into."""
    found = {root}
    for rel in stage.relations:
        if isinstance(rel, Split) and rel.parent in found:
            found |= {rel.outer, rel.inner}
        elif isinstance(rel, Fuse) and (rel.outer in found or rel.inner in found):
            found.add(rel.fused)
    return found & set(stage.leaf_iter_vars)


def _check_axes(bounds: BoundInference, st: Stage, out: Stage, where: str) -> None:
    assert st.attach_ivar is not None   # checked attached to out
    pos = out.leaf_iter_vars.index(st.attach_ivar)
    outside = set(out.leaf_iter_vars[:pos + 1])
    at = bounds.root_values(out)
    ranges = bounds.ranges[id(st)]
    for d, iv in enumerate(out.op.axis):
        leaves = _descendants(out, iv)
        if leaves <= outside:
            rng = ranges[st.op.axis[d]]
            offset = simplify_expr(Binary(BinOp.SUB, rng.min, at[iv]))
            if rng.extent != 1 or not (isinstance(offset, Const) and offset.value == 0):
                raise ScheduleError(f"{where}: {st.name} is computed beyond the index of {out.name}'s loop "
                                    f"{iv.name}, where other iterations store")
        elif leaves & outside:
            raise ScheduleError(f"{where}: axis {iv.name} of {out.name} runs partly outside and partly inside "
                                f"the loop {st.attach_ivar.name}; attach {st.name} where each axis is on one side")
