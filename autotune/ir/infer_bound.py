"""Bound inference: the range of every root axis of every stage (TVM's InferBound).

A stage at root computes its whole tensor. A stage attached with compute_at computes only the
region its consumers read inside the attach loop: the consumer's loops outside (and at) the
attach axis stay symbolic, the loops inside it are relaxed over their extents. A "shared"
stage serves a whole GPU block, so the thread loops enclosing its attach point are relaxed too. The region's
start is an expression of the outer loop variables; its extent must be a constant (it sizes a
buffer), otherwise the whole tensor is taken, which is always correct.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from ..errors import ScheduleError
from ..schedules.schedule import Fuse, Schedule, Split, Stage
from ..te.expr import Binary, BinOp, Const, Expr, IterVar, TensorLoad, Var
from ..te.tensor import ComputeOp
from ..te.traversal import substitute, transform, walk
from .bounds import Interval, const_bound, symbolic_bound
from .passes.simplify import simplify_expr


@dataclass(frozen=True)
class Range:
    """[min, min + extent) of a root axis; min may depend on enclosing loop variables."""

    min: Expr
    extent: int


def pass_down(stage: Stage, root_ext: dict[IterVar, int]) -> dict[IterVar, int]:
    """Extents of every axis from the root extents, through the split/fuse relations."""
    ext = dict(root_ext)
    for rel in stage.relations:
        if isinstance(rel, Split):
            e = ext[rel.parent]
            if rel.factor is not None:
                inner = min(rel.factor, e)
                ext[rel.inner], ext[rel.outer] = inner, -(-e // inner)
            else:
                assert rel.nparts is not None   # a split has a factor or nparts
                outer = min(rel.nparts, e)
                ext[rel.outer], ext[rel.inner] = outer, -(-e // outer)
        else:
            ext[rel.fused] = ext[rel.outer] * ext[rel.inner]
    return ext


def relaxed_pass_up(stage: Stage, ext: dict[IterVar, int], leaf_value: dict[IterVar, Expr],
                    whole: set[IterVar]) -> tuple[dict[IterVar, Expr], dict[Var, tuple[Expr, Expr]]]:
    """`pass_up` where the leaves in `whole` run over their whole extent: a split both of whose
    halves do runs over its parent's extent (TVM's PassUpDomain), not over the halves' product,
    which a tail exceeds (its guard skips the rest). Such an axis gets a variable of its own,
    returned with its range, so a region read over a split with a tail is the axis's own."""
    whole = set(whole)
    value = dict(leaf_value)
    ranges: dict[Var, tuple[Expr, Expr]] = {}
    for rel in reversed(stage.relations):
        if isinstance(rel, Fuse):
            f, n = value[rel.fused], ext[rel.inner]
            value[rel.outer], value[rel.inner] = f // n, f % n
        elif rel.outer in whole and rel.inner in whole:
            var = Var(f"{rel.parent.var.name}.whole")
            value[rel.parent], ranges[var] = var, (Const(0, "int32"), Const(ext[rel.parent] - 1, "int32"))
            whole.add(rel.parent)
        else:
            value[rel.parent] = value[rel.outer] * ext[rel.inner] + value[rel.inner]
    return value, ranges


def pass_up(stage: Stage, ext: dict[IterVar, int], leaf_value: dict[IterVar, Expr]) -> dict[IterVar, Expr]:
    """Offset of every axis (root ones included) given the values of the leaf axes."""
    return relaxed_pass_up(stage, ext, leaf_value, set())[0]


def expanded_body(schedule: Schedule, stage: Stage) -> Expr:
    """The stage's body with every inlined producer substituted in (recursively)."""

    def inline(n: object) -> Expr | None:
        if not isinstance(n, TensorLoad) or n.tensor not in schedule:
            return None
        producer = schedule[n.tensor]
        if producer.attach != "inline":
            return None
        op = cast(ComputeOp, producer.op)   # only compute ops are inlined
        body = substitute(op.body, {iv.var: i for iv, i in zip(op.axis, n.indices)})
        return transform(body, inline)

    return transform(cast(ComputeOp, stage.op).body, inline)   # bodies are asked of compute stages


def _loads_of(body: Expr, schedule: Schedule, producer: Stage) -> list[TensorLoad]:
    out: list[TensorLoad] = []
    walk(body, lambda n: out.append(n) if isinstance(n, TensorLoad) and n.tensor in schedule
         and schedule[n.tensor] is producer else None)
    return out


def _const_value(e: Expr) -> int | None:
    s = simplify_expr(e)
    return cast(int, s.value) if isinstance(s, Const) else None   # index expressions are int


def _index_bound(idx: Expr, relax: dict[Var, tuple[Expr, Expr]], leaf_values: dict[Var, Expr] | None,
                 inner_relax: dict[Var, tuple[Expr, Expr]]) -> tuple[Expr, Expr] | None:
    """[lo, hi] of one index a consumer reads. Read by the attach stage itself, the index is first
    written in that stage's loop variables and simplified: an axis fused and split again, as in
    `(p // w) * w + p % w`, then spans the tile of p, where bounding each root variable on its own
    (`relax`) spans whole rows of w."""
    if leaf_values is not None:
        b = symbolic_bound(simplify_expr(substitute(idx, leaf_values)), inner_relax, _const_value)
        if b is not None:
            return b
    return symbolic_bound(idx, relax, _const_value)


class BoundInference:
    """Computes and holds the root ranges and loop extents of every non-inline stage."""

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        self.bodies = {id(st): expanded_body(schedule, st) for st in schedule.stages
                       if isinstance(st.op, ComputeOp) and st.attach != "inline"}
        self.ranges: dict[int, dict[IterVar, Range]] = {}
        self.extents: dict[int, dict[IterVar, int]] = {}
        for st in reversed(schedule.stages):
            if id(st) in self.bodies:
                self.ranges[id(st)] = self._infer(st)
                self.extents[id(st)] = pass_down(st, {iv: r.extent for iv, r in self.ranges[id(st)].items()})

    def body(self, stage: Stage) -> Expr:
        return self.bodies[id(stage)]

    def root_values(self, stage: Stage) -> dict[IterVar, Expr]:
        """Root axis values (range min + offset) in terms of the stage's leaf loop variables."""
        ext = self.extents[id(stage)]
        vals = pass_up(stage, ext, {iv: iv.var for iv in stage.leaf_iter_vars})
        return {iv: r.min + vals[iv] for iv, r in self.ranges[id(stage)].items()}

    def loop_ranges(self, stage: Stage | None) -> dict[Var, Interval]:
        """Constant ranges of the stage's loop variables and of all loops enclosing it."""
        out: dict[Var, Interval] = {}
        st: Stage | None = stage
        while st is not None and id(st) in self.extents:
            out.update({iv.var: (0, self.extents[id(st)][iv] - 1) for iv in st.leaf_iter_vars})
            st = st.attach_stage
        return out

    def _infer(self, st: Stage) -> dict[IterVar, Range]:
        op: ComputeOp = st.op  # type: ignore[assignment]
        full = {iv: Range(Const(iv.dom_min, "int32"), iv.extent) for iv in st.root_iter_vars}
        if st.attach != "scope":
            return full
        region = self._region(st)
        out = dict(full)
        for iv, (lo, hi) in zip(op.axis, region):
            out[iv] = self._range(st, iv, lo, hi)
        return out

    def _range(self, st: Stage, iv: IterVar, lo: Expr, hi: Expr) -> Range:
        lo = simplify_expr(lo)
        extent = simplify_expr(hi - lo + 1)
        const_extent: Const | None = extent if isinstance(extent, Const) else None
        if const_extent is None:
            bound = const_bound(extent, self.loop_ranges(st.attach_stage))
            const_extent = None if bound is None else Const(bound[1], "int32")
        if const_extent is None or const_extent.value < 1:
            return Range(Const(iv.dom_min, "int32"), iv.extent)
        return Range(lo, cast(int, const_extent.value))

    def _region(self, st: Stage) -> list[tuple[Expr, Expr]]:
        """Per dimension of `st`'s tensor, [lo, hi] of what its consumers read in the attach loop."""
        parent, axis = st.attach_stage, st.attach_ivar
        assert parent is not None and axis is not None
        pos = parent.leaf_iter_vars.index(axis)
        parent_ext = self.extents[id(parent)]
        inner_relax: dict[Var, tuple[Expr, Expr]] = {iv.var: (Const(0, "int32"), Const(parent_ext[iv] - 1, "int32"))
                       for iv in parent.leaf_iter_vars[pos + 1:]}
        if st.scope == "shared":
            inner_relax.update(self._enclosing_threads(parent, pos))
        region: list[tuple[Expr, Expr] | None] = [None] * len(st.op.shape)
        parent_values, whole_ranges = self._relaxed_root_values(parent, inner_relax)
        parent_relax = {**inner_relax, **whole_ranges}
        for consumer in self.schedule.stages:
            if id(consumer) not in self.bodies or consumer is st:
                continue
            loads = _loads_of(self.bodies[id(consumer)], self.schedule, st)
            if not loads:
                continue
            if consumer is parent:
                relax = {iv.var: self._bound(v, parent_relax) for iv, v in parent_values.items()}
                leaf_values: dict[Var, Expr] | None = {iv.var: v for iv, v in parent_values.items()}
            else:
                relax, leaf_values = self._consumer_relax(st, consumer, parent, pos, inner_relax), None
            for load in loads:
                for d, idx in enumerate(load.indices):
                    b = _index_bound(idx, relax, leaf_values, parent_relax)
                    if b is None:
                        return [(Const(0, "int32"), Const(n - 1, "int32")) for n in st.op.shape]
                    cur = region[d]
                    region[d] = b if cur is None else (Binary(BinOp.MIN, cur[0], b[0]), Binary(BinOp.MAX, cur[1], b[1]))
        assert all(r is not None for r in region), "compute_at checked that the attach stage reads this stage"
        return region  # type: ignore[return-value]

    def _relaxed_root_values(self, parent: Stage, inner_relax: dict[Var, tuple[Expr, Expr]]
                             ) -> tuple[dict[IterVar, Expr], dict[Var, tuple[Expr, Expr]]]:
        """The attach stage's root axis values (range min + offset) with its loops in
        `inner_relax` running whole (`relaxed_pass_up`), and the ranges of the variables that
        adds."""
        ext = self.extents[id(parent)]
        whole = {iv for iv in parent.leaf_iter_vars if iv.var in inner_relax}
        vals, ranges = relaxed_pass_up(parent, ext, {iv: iv.var for iv in parent.leaf_iter_vars}, whole)
        return {iv: r.min + vals[iv] for iv, r in self.ranges[id(parent)].items()}, ranges

    @staticmethod
    def _bound(value: Expr, relax: dict[Var, tuple[Expr, Expr]]) -> tuple[Expr, Expr]:
        """[lo, hi] of a root value: loops outside the region's relaxed ones stay symbolic."""
        b = symbolic_bound(value, relax, _const_value)
        assert b is not None    # root values are sums and products of loop variables
        return b

    def _enclosing_threads(self, stage: Stage, pos: int) -> dict[Var, tuple[Expr, Expr]]:
        """threadIdx and vthread loops at or outside `stage`'s leaf `pos`, up the attach chain."""
        out: dict[Var, tuple[Expr, Expr]] = {}
        while True:
            ext = self.extents[id(stage)]
            for iv in stage.leaf_iter_vars[:pos + 1]:
                thread = stage.attr_of(iv).thread
                if thread is not None and not thread.thread_tag.startswith("blockIdx"):
                    out[iv.var] = (Const(0, "int32"), Const(ext[iv] - 1, "int32"))
            if stage.attach != "scope" or stage.attach_stage is None:
                return out
            assert stage.attach_ivar is not None   # attached at a scope: at one of its loops
            pos = stage.attach_stage.leaf_iter_vars.index(stage.attach_ivar)
            stage = stage.attach_stage

    def _consumer_relax(self, st: Stage, consumer: Stage, parent: Stage, pos: int,
                        inner_relax: dict[Var, tuple[Expr, Expr]]) -> dict[Var, tuple[Expr, Expr]]:
        """How each root variable of `consumer`, a stage computed inside the attach loop of `st`
        (not that loop's own stage), ranges there."""
        if not self._inside(consumer, parent, pos):
            assert st.attach_ivar is not None   # st is attached at parent's loop
            raise ScheduleError(
                f"compute_at of {st.name} at {parent.name}.{st.attach_ivar.name}: {consumer.name} also reads "
                f"{st.name} but is not computed inside that loop; attach {consumer.name} there too or use compute_root")
        relax = {}
        for iv, r in self.ranges[id(consumer)].items():
            lo = symbolic_bound(r.min, inner_relax, _const_value)
            assert lo is not None
            relax[iv.var] = (lo[0], lo[1] + (r.extent - 1))
        return relax

    def _inside(self, consumer: Stage, parent: Stage, pos: int) -> bool:
        st = consumer
        while st.attach == "scope" and st.attach_stage is not None:
            if st.attach_stage is parent:
                assert st.attach_ivar is not None   # attached at a scope: at one of its loops
                return parent.leaf_iter_vars.index(st.attach_ivar) >= pos
            st = st.attach_stage
        return False
