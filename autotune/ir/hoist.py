"""Weight transforms hoisted out of a kernel (MetaSchedule's layout rewrite): the stages that
read only constant inputs (a conv's blocked weights, Winograd's G g G^T) are computed once by a
prologue, and the kernel reads their results as inputs instead of recomputing them per call.

A stage is hoisted when it is computed at root (not inlined, not attached inside another
stage's loops: a chunk of U made where the GEMM uses it stays in the kernel), its inputs are,
transitively, constant inputs only (at least one), and a stage that is not hoisted reads it (the
frontier). The kernel is the same schedule lowered with the frontier `given`; the prologue is a
default schedule of the frontier (it runs once, so only its outer loops are parallel).

A task told its constant inputs (`Task.set_constant_inputs`, as `tune_model` does) is lowered,
measured and ranked split this way; the prologue runs once per candidate, untimed.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..schedules.schedule import Schedule, Stage, create_schedule
from ..te.tensor import ComputeOp, PlaceholderOp, Tensor, post_order
from .lower import lower
from .nodes import PrimFunc
from .schedule_ops import needed_stages

_DATA, _NONE, _WEIGHT = "data", "none", "weight"   # what a stage's value depends on


@dataclass(frozen=True)
class HoistPlan:
    """How one kernel splits: `tensors` (the frontier) are computed by the prologue from the
    constant inputs `prologue_inputs` (positions in the kernel's args); the kernel's inputs are
    `sources`, each ("input", position in args) or ("hoisted", index in tensors)."""

    schedule: Schedule
    args: tuple[Tensor, ...]
    tensors: tuple[Tensor, ...]
    prologue_inputs: tuple[int, ...]
    sources: tuple[tuple[str, int], ...]

    def kernel(self, name: str) -> PrimFunc:
        """The kernel reading the hoisted tensors: its inputs by `sources`, then its outputs."""
        ins = [self.args[i] if kind == "input" else self.tensors[i] for kind, i in self.sources]
        outs = [t for t in self.args if not isinstance(t.op, PlaceholderOp)]
        return lower(self.schedule, [*ins, *outs], name, given=self.tensors)

    def prologue(self, name: str) -> PrimFunc:
        """The function computing `tensors` (its last parameters) from the constant inputs."""
        s = create_schedule(list(self.tensors))
        for st in s.stages:
            if isinstance(st.op, ComputeOp):
                st.parallel(st.op.axis[0])
        return lower(s, [*(self.args[i] for i in self.prologue_inputs), *self.tensors], name)


def _kinds(s: Schedule, consts: set[int]) -> dict[int, str]:
    """Per stage id: "weight" (reads constant inputs and nothing else), "data" (reads a
    non-constant input, or is not a compute) or "none" (reads no input at all: a table)."""
    kind: dict[int, str] = {}
    for st in s.stages:                                  # producers first
        if isinstance(st.op, PlaceholderOp):
            kind[id(st)] = _WEIGHT if id(st) in consts else _DATA
            continue
        ins = {kind[id(s[t])] for t in st.op.input_tensors}
        if not isinstance(st.op, ComputeOp) or _DATA in ins:
            kind[id(st)] = _DATA
        else:
            kind[id(st)] = _WEIGHT if _WEIGHT in ins else _NONE
    return kind


def frontier(s: Schedule, consts: set[int]) -> list[Stage]:
    """The hoistable stages (module docstring) that a stage staying in the kernel reads, in
    schedule order; `consts` are the ids of the constant placeholders' stages."""
    kind = _kinds(s, consts)

    def hoistable(st: Stage) -> bool:
        return kind[id(st)] == _WEIGHT and st.attach == "root" and not st.is_output \
            and not isinstance(st.op, PlaceholderOp)

    return [st for st in s.stages if hoistable(st) and not all(map(hoistable, s.readers(st)))]


def _placeholders(t: Tensor) -> set[int]:
    """Ids of the placeholder ops `t` reads, transitively."""
    return {id(op) for op in post_order([t.op]) if isinstance(op, PlaceholderOp)}


def plan_hoist(s: Schedule, args: Sequence[Tensor], consts: Iterable[int]) -> HoistPlan | None:
    """The split of the kernel `(s, args)` whose inputs at positions `consts` are constants, or
    None when no stage is hoistable. Each hoisted tensor takes the place of the first constant
    input it reads; a constant input that only hoisted stages read is no longer an input."""
    args = tuple(args)
    const_pos = sorted(set(consts))
    if any(not isinstance(args[i].op, PlaceholderOp) for i in const_pos):
        raise ValueError(f"plan_hoist: consts {const_pos} must be positions of inputs in args")
    stages = frontier(s, {id(s[args[i]]) for i in const_pos})
    if not stages:
        return None
    tensors = tuple(st.op.output(0) for st in stages)
    reads = [_placeholders(t) for t in tensors]
    first = [next(i for i in const_pos if id(args[i].op) in r) for r in reads]
    needed = needed_stages(s, tensors)
    sources: list[tuple[str, int]] = []
    for pos, t in enumerate(args):
        if not isinstance(t.op, PlaceholderOp):
            continue
        if pos not in const_pos or any(id(r) in needed for r in s.readers(s[t])):
            sources.append(("input", pos))
        sources.extend(("hoisted", j) for j, f in enumerate(first) if f == pos)
    used = sorted({i for r in reads for i in const_pos if id(args[i].op) in r})
    return HoistPlan(s, args, tensors, tuple(used), tuple(sources))
