"""Schedules: how to run a tensor program. Primitives validate, then record relations.

Only lowering turns the recorded relations (Split, Fuse) and attributes into loops, as TVM's
InferBound + MakeLoopNest do. Every illegal use raises ScheduleError naming the stage, the axis
and the rule.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ScheduleError, check
from ..te.expr import IterVar, Var
from ..te.tensor import ComputeOp, ExternOp, Operation, PlaceholderOp, Tensor, post_order


@dataclass(frozen=True, eq=False)
class Split:
    """parent = outer * inner_extent + inner; exactly one of factor (inner extent) or nparts."""

    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int | None
    nparts: int | None


@dataclass(frozen=True, eq=False)
class Fuse:
    """fused = outer * inner_extent + inner."""

    outer: IterVar
    inner: IterVar
    fused: IterVar


@dataclass
class IterAttr:
    """How a leaf axis runs: kind in {"serial", "vectorize", "unroll", "parallel", "bind"};
    `prefetch`: (tensor, offset) pairs, each fetched `offset` iterations ahead (Stage.prefetch)."""

    kind: str = "serial"
    thread: IterVar | None = None
    pragmas: dict[str, Any] = field(default_factory=dict)
    prefetch: list[tuple[Tensor, int]] = field(default_factory=list)


class Stage:
    """The schedule of one operation: its loop axes, their relations and where it is computed."""

    def __init__(self, op: Operation, schedule: Schedule, scope: str = "global") -> None:
        self.op = op
        self.origin_op = op
        self.schedule = schedule
        self.scope = scope
        self.double_buffered = False
        self.storage: Stage | None = None      # store_in: the output whose buffer holds this stage
        self.is_output = False
        self.attach = "root"                  # "root" | "inline" | "scope"
        self.attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None
        self.relations: list[Split | Fuse] = []
        self.iter_attrs: dict[IterVar, IterAttr] = {}
        self.reset_axes()

    def reset_axes(self) -> None:
        roots = list(self.op.axis) + list(self.op.reduce_axis) if isinstance(self.op, ComputeOp) else []
        self.root_iter_vars: list[IterVar] = roots
        self.all_iter_vars: list[IterVar] = list(roots)
        self.leaf_iter_vars: list[IterVar] = list(roots)

    @property
    def name(self) -> str:
        return self.op.name

    def __repr__(self) -> str:
        return f"Stage({self.name})"

    # -- validation helpers -------------------------------------------------------------------
    def _require_compute(self, prim: str) -> None:
        if not isinstance(self.op, ComputeOp):
            hand_written = "an extern op (its loops are hand-written)"
            kind = "a placeholder" if isinstance(self.op, PlaceholderOp) else hand_written
            raise ScheduleError(f"{prim} of {self.name}: {kind} has no loops to schedule")

    def _leaf(self, axis: Any, prim: str) -> IterVar:
        self._require_compute(prim)
        check(isinstance(axis, IterVar), f"{prim} of {self.name}: expected an IterVar axis, got {type(axis).__name__}")
        if axis in self.leaf_iter_vars:
            return axis
        if axis in self.all_iter_vars:
            raise ScheduleError(f"{prim} of {self.name}.{axis.name}: axis was already split or fused; use its new axes")
        raise ScheduleError(f"{prim} of {self.name}.{axis.name}: axis does not belong to stage {self.name}")

    def _not_read_by_extern(self, prim: str) -> None:
        for reader in self.schedule.readers(self):
            check(not isinstance(reader.op, ExternOp),
                  f"{prim} of {self.name}: extern {reader.name} reads {self.name} whole, so it must stay at root")

    def _not_attach_point(self, axes: tuple[IterVar, ...], prim: str) -> None:
        for st in self.schedule.stages:
            if st.attach == "scope" and st.attach_stage is self and st.attach_ivar in axes:
                raise ScheduleError(f"{prim} of {self.name}.{st.attach_ivar.name}: {st.name} is computed at this "
                                    f"axis; {prim} before compute_at")

    def _new_axis(self, name: str, extent: int, kind: str) -> IterVar:
        iv = IterVar(Var(name), 0, extent, kind)
        self.all_iter_vars.append(iv)
        return iv

    # -- loop structure -----------------------------------------------------------------------
    def split(self, parent: IterVar, factor: int | None = None, nparts: int | None = None) -> tuple[IterVar, IterVar]:
        """Split `parent` into (outer, inner); a tail that does not divide is guarded."""
        self._leaf(parent, "split")
        self._not_attach_point((parent,), "split")
        where = f"split of {self.name}.{parent.name}"
        check((factor is None) != (nparts is None), f"{where}: give exactly one of factor= or nparts=")
        n = factor if factor is not None else nparts
        check(isinstance(n, int) and not isinstance(n, bool), f"{where}: factor must be an int, got {n!r}")
        assert isinstance(n, int)   # checked just above (check raises)
        check(n > 0, f"{where}: {'factor' if factor is not None else 'nparts'} must be > 0, got {n}")
        ext = parent.extent
        inner_ext = factor if factor is not None else -(-ext // n)   # n is nparts here
        outer = self._new_axis(f"{parent.name}.outer", -(-ext // inner_ext), parent.kind)
        inner = self._new_axis(f"{parent.name}.inner", inner_ext, parent.kind)
        self.relations.append(Split(parent, outer, inner, factor, nparts))
        pos = self.leaf_iter_vars.index(parent)
        self.leaf_iter_vars[pos:pos + 1] = [outer, inner]
        return outer, inner

    def tile(self, x: IterVar, y: IterVar, x_factor: int, y_factor: int) -> tuple[IterVar, IterVar, IterVar, IterVar]:
        """Split x and y and order them (x.outer, y.outer, x.inner, y.inner)."""
        xo, xi = self.split(x, x_factor)
        yo, yi = self.split(y, y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def fuse(self, *axes: IterVar) -> IterVar:
        """Fuse adjacent axes (outer to inner) into one."""
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        check(len(axes) >= 1, f"fuse of {self.name}: needs at least one axis")
        for a in axes:
            self._leaf(a, "fuse")
        self._not_attach_point(axes, "fuse")
        names = ", ".join(a.name for a in axes)
        pos = [self.leaf_iter_vars.index(a) for a in axes]
        check(pos == list(range(pos[0], pos[0] + len(axes))),
              f"fuse of {self.name}.({names}): axes must be adjacent and ordered outer to inner")
        check(len({a.kind for a in axes}) == 1,
              f"fuse of {self.name}.({names}): cannot fuse a reduction axis with a data-parallel axis")
        fused = axes[0]
        for inner in axes[1:]:
            new = self._new_axis(f"{fused.name}.{inner.name}.fused", fused.extent * inner.extent, fused.kind)
            self.relations.append(Fuse(fused, inner, new))
            p = self.leaf_iter_vars.index(fused)
            self.leaf_iter_vars[p:p + 2] = [new]
            fused = new
        return fused

    def reorder(self, *axes: IterVar) -> None:
        """Put the given axes, in this order, into the positions they occupy."""
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        for a in axes:
            self._leaf(a, "reorder")
        check(len(set(axes)) == len(axes), f"reorder of {self.name}: an axis appears twice")
        positions = sorted(self.leaf_iter_vars.index(a) for a in axes)
        for p, a in zip(positions, axes):
            self.leaf_iter_vars[p] = a

    # -- loop annotations ---------------------------------------------------------------------
    def _annotate(self, axis: IterVar, kind: str) -> None:
        self._leaf(axis, kind)
        if kind in ("vectorize", "parallel"):
            check(axis.kind != "reduce", f"{kind} of {self.name}.{axis.name}: cannot {kind} a reduction axis")
        attr = self.iter_attrs.setdefault(axis, IterAttr())
        check(not (attr.prefetch and kind in ("vectorize", "parallel")),
              f"{kind} of {self.name}.{axis.name}: the axis prefetches; prefetch along a serial or unrolled loop")
        attr.kind = kind

    def vectorize(self, axis: IterVar) -> None:
        """Run the axis as SIMD lanes (LLVM vector instructions)."""
        self._annotate(axis, "vectorize")

    def unroll(self, axis: IterVar) -> None:
        """Replace the loop by copies of its body."""
        self._annotate(axis, "unroll")

    def parallel(self, axis: IterVar) -> None:
        """Spread the loop's iterations over CPU threads."""
        self._annotate(axis, "parallel")

    def bind(self, axis: IterVar, thread: IterVar) -> None:
        """Run the axis as a GPU thread or block index (used by the CUDA backend)."""
        self._leaf(axis, "bind")
        check(isinstance(thread, IterVar) and thread.kind == "thread",
              f"bind of {self.name}.{axis.name}: expected a te.thread_axis, got {thread!r}")
        for other, attr in self.iter_attrs.items():
            check(not (attr.kind == "bind" and attr.thread is not None and attr.thread.thread_tag == thread.thread_tag
                       and other is not axis and thread.thread_tag != "vthread"),
                  f"bind of {self.name}.{axis.name}: {thread.thread_tag} is already bound to {self.name}.{other.name}")
        attr = self.iter_attrs.setdefault(axis, IterAttr())
        check(not attr.prefetch, f"bind of {self.name}.{axis.name}: the axis prefetches; prefetch along a serial "
                                 "or unrolled loop")
        attr.kind, attr.thread = "bind", thread

    def pragma(self, axis: IterVar, key: str, value: Any = True) -> None:
        """Attach a free-form annotation to an axis (kept for backends and the cost model)."""
        self._leaf(axis, "pragma")
        self.iter_attrs.setdefault(axis, IterAttr()).pragmas[key] = value

    def prefetch(self, tensor: Tensor, axis: IterVar, offset: int) -> None:
        """At the top of each iteration of loop `axis`, fetch into the caches what this stage's
        reads of `tensor` inside that loop will touch `offset` iterations later (TVM's
        prefetch): for a stream that comes from memory (weights, in a model) faster than the
        hardware prefetcher brings it. A hint: results never change."""
        self._leaf(axis, "prefetch")
        where = f"prefetch of {getattr(tensor, 'name', tensor)} at {self.name}.{axis.name}"
        check(isinstance(tensor, Tensor) and tensor in self.op.input_tensors,
              f"{where}: {self.name} does not read that tensor")
        check(isinstance(offset, int) and not isinstance(offset, bool) and offset >= 1,
              f"{where}: offset must be an int >= 1 (iterations ahead), got {offset!r}")
        attr = self.iter_attrs.setdefault(axis, IterAttr())
        check(attr.kind in ("serial", "unroll"), f"{where}: the axis is {attr.kind}; prefetch along a serial "
                                                 "or unrolled loop")
        attr.prefetch.append((tensor, offset))

    # -- where the stage is computed ----------------------------------------------------------
    def compute_at(self, parent: Stage, axis: IterVar) -> None:
        """Compute this stage inside `parent`'s loop `axis`, only the region that loop needs."""
        self._require_compute("compute_at")
        where = f"compute_at of {self.name}"
        check(isinstance(parent, Stage), f"{where}: expected a Stage (s[T]), got {type(parent).__name__}")
        check(parent is not self, f"{where}: cannot compute a stage inside itself")
        check(axis in parent.leaf_iter_vars,
              f"{where} at {parent.name}.{getattr(axis, 'name', axis)}: not a current (leaf) axis of {parent.name}")
        check(self.schedule.reads_transitively(parent, self),
              f"{where} at {parent.name}.{axis.name}: {parent.name} does not consume {self.name}")
        self._not_read_by_extern("compute_at")
        self.attach, self.attach_stage, self.attach_ivar = "scope", parent, axis

    def double_buffer(self) -> None:
        """GPU: give this shared stage two buffers, so the fill for the next iteration of its
        attach loop overlaps the reads of this one (one barrier per iteration instead of two)."""
        self._require_compute("double_buffer")
        self.double_buffered = True

    def set_scope(self, scope: str) -> None:
        """Where the stage's buffer lives when it is not an argument: "global", "local" (per
        thread) or "shared" (per GPU block)."""
        from .dataflow import check_scope

        check_scope(scope, f"set_scope of {self.name}")
        self.scope = scope

    def store_in(self, output: Stage) -> None:
        """Keep this attached stage's values in `output`'s buffer instead of a buffer of its own;
        `output` then overwrites them in place, element by element. For a row-sized intermediate
        that the output reads back once (softmax's exp): its own buffer would cost one more pass,
        whose stores to the output all miss, instead of stores hidden behind the computation.

        Checked when lowering (`autotune.ir.inplace`): `output` is an output at root, of the
        same shape and dtype, read by nothing, reading this stage only at its own index; this
        stage is attached at one of its loops, with every other reader, and every axis of
        `output` runs wholly outside or wholly inside that loop."""
        self._require_compute("store_in")
        check(isinstance(output, Stage), f"store_in of {self.name}: expected a Stage (s[T]), got "
                                         f"{type(output).__name__}")
        check(output.is_output, f"store_in of {self.name}: {output.name} is not an output")
        check(tuple(output.op.shape) == tuple(self.op.shape) and output.op.dtype == self.op.dtype,
              f"store_in of {self.name}: {output.name} is {output.op.dtype}{list(output.op.shape)}, "
              f"{self.name} is {self.op.dtype}{list(self.op.shape)}")
        self.storage = output

    def compute_inline(self) -> None:
        """Substitute this stage's expression into its consumers (no buffer, no loops)."""
        self._require_compute("compute_inline")
        check(not self.op.reduce_axis, f"compute_inline of {self.name}: a reduction cannot be inlined")
        check(not self.is_output, f"compute_inline of {self.name}: an output cannot be inlined")
        self._not_read_by_extern("compute_inline")
        self.attach, self.attach_stage, self.attach_ivar = "inline", None, None

    def compute_root(self) -> None:
        """Compute the whole tensor before its consumers (the default)."""
        self._require_compute("compute_root")
        self.attach, self.attach_stage, self.attach_ivar = "root", None, None

    # -- axis kinds, for lowering -------------------------------------------------------------
    def attr_of(self, axis: IterVar) -> IterAttr:
        return self.iter_attrs.get(axis) or IterAttr()


class Schedule:
    """The stages of a program in topological order (producers first), keyed by operation."""

    def __init__(self, outputs: Sequence[Operation]) -> None:
        self.outputs = list(outputs)
        self.stages: list[Stage] = []
        self._stage_of: dict[int, Stage] = {}
        for op in post_order(self.outputs):
            self.add_stage(Stage(op, self))
        for op in self.outputs:
            self[op].is_output = True

    def add_stage(self, stage: Stage, index: int | None = None) -> None:
        self.stages.insert(len(self.stages) if index is None else index, stage)
        self._stage_of[id(stage.op)] = stage
        self._stage_of[id(stage.origin_op)] = stage

    def register_op(self, stage: Stage, op: Operation) -> None:
        """Make `stage` compute `op` from now on (dataflow rewrites); old handles still find it."""
        stage.op = op
        self._stage_of[id(op)] = stage

    def __getitem__(self, t: Tensor | Operation) -> Stage:
        op = t.op if isinstance(t, Tensor) else t
        stage = self._stage_of.get(id(op))
        if stage is None:
            raise ScheduleError(f"{getattr(op, 'name', op)} is not part of this schedule")
        return stage

    def __contains__(self, t: Tensor | Operation) -> bool:
        op = t.op if isinstance(t, Tensor) else t
        return id(op) in self._stage_of

    def stage_of_tensor(self, t: Tensor) -> Stage:
        return self[t]

    def readers(self, stage: Stage) -> list[Stage]:
        """Stages whose current op reads `stage`'s tensor directly."""
        return [s for s in self.stages
                if any(self._stage_of.get(id(t.op)) is stage for t in s.op.input_tensors)]

    def reads_transitively(self, consumer: Stage, producer: Stage) -> bool:
        todo, seen = [consumer], set()
        while todo:
            s = todo.pop()
            for t in s.op.input_tensors:
                p = self._stage_of.get(id(t.op))
                if p is producer:
                    return True
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    todo.append(p)
        return False

    def cache_write(self, tensor: Tensor, scope: str) -> Tensor:
        from .dataflow import cache_write

        return cache_write(self, tensor, scope)

    def cache_read(self, tensor: Tensor, scope: str, readers: Sequence[Any]) -> Tensor:
        from .dataflow import cache_read

        return cache_read(self, tensor, scope, readers)


def create_schedule(ops: Any) -> Schedule:
    """A default schedule (every stage at root, loops in axis order) of the given outputs."""
    items = ops if isinstance(ops, (list, tuple)) else [ops]
    out: list[Operation] = []
    for x in items:
        op = x.op if isinstance(x, Tensor) else x
        if not isinstance(op, (ComputeOp, ExternOp, PlaceholderOp)):
            raise TypeError(f"create_schedule expects tensors or operations, got {type(x).__name__}")
        out.append(op)
    return Schedule(out)
