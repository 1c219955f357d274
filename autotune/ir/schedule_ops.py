"""Build the loop nests of a schedule (TVM's ScheduleOps + MakeLoopNest + MakeReduction).

Each non-inline stage becomes a loop nest over its leaf axes; root axes are recovered from the
leaves through the split/fuse relations; a tail that does not divide gets a guard at the
outermost loop where its variables are all bound. Stages attached with compute_at are built at
their attach loop with a buffer the size of the inferred region, or in an output's buffer
(`Stage.store_in`, checked by `autotune.ir.inplace`). Tensor reads become flat
buffer loads; reads inside an if_then_else branch, or under a reduction's condition, are predicated
so they never go out of bounds.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..dtype import dtype_info
from ..errors import ScheduleError
from ..schedules.schedule import Schedule, Stage
from ..te.expr import And, Binary, BinOp, Const, Expr, IterVar, Not, Reduce, Select, TensorLoad, Var, const
from ..te.tensor import ComputeOp, ExternOp, PlaceholderOp, Tensor
from ..te.traversal import substitute, transform
from .bounds import const_bound
from .builder import flat_index
from .functor import uses_var
from .infer_bound import BoundInference, pass_up
from .inplace import check_store_in
from .nodes import Allocate, Buffer, For, ForKind, IfThenElse, Load, Stmt, Store, ThreadAllReduce, seq
from .prefetch import prefetches

_KINDS = {"serial": ForKind.SERIAL, "vectorize": ForKind.VECTORIZED, "unroll": ForKind.UNROLLED,
          "parallel": ForKind.PARALLEL, "bind": ForKind.THREAD_BOUND}


def reduce_identity(combiner: str, dtype: str) -> Const:
    """The value a reduction starts from: 0 for sum, the lowest value for max, the highest for min."""
    if combiner == "sum":
        return const(0, dtype)
    kind = dtype_info(dtype).kind
    if kind == "float":
        lo, hi = float("-inf"), float("inf")
    else:                       # int, uint and bool (False < True)
        info = np.iinfo(dtype_info(dtype).numpy) if kind != "bool" else None
        lo, hi = (int(info.min), int(info.max)) if info is not None else (0, 1)
    return const(lo if combiner == "max" else hi, dtype)


def combine(combiner: str, acc: Expr, value: Expr) -> Expr:
    if combiner == "sum":
        return acc + value
    return Binary(BinOp.MAX if combiner == "max" else BinOp.MIN, acc, value)


def _predicate_loads(e: Expr, cond: Expr) -> Expr:
    def post(n: object) -> Expr | None:
        if isinstance(n, Load):
            return Load(n.buffer, n.index, cond if n.predicate is None else And(n.predicate, cond))
        return None

    return transform(e, post)


class NestBuilder:
    """Turns a schedule with inferred bounds into one statement over the argument buffers."""

    def __init__(self, schedule: Schedule, bounds: BoundInference, params: dict[int, Buffer],
                 needed: set[int]) -> None:
        self.schedule = schedule
        self.bounds = bounds
        self.needed = needed            # ids of the stages whose code this function runs
        self.buffers: dict[int, Buffer] = dict(params)
        self.params = set(params.values())
        self.offsets: dict[int, list[Expr]] = {}
        for st in filter(self._has_code, schedule.stages):
            op = st.op
            if st.attach == "scope":
                rng = bounds.ranges[id(st)]
                shape = tuple(rng[iv].extent for iv in op.axis)
                scope = "local" if st.scope == "global" else st.scope
                self.buffers[id(st)] = Buffer(st.name, shape, op.dtype, scope, st.double_buffered)
                self.offsets[id(st)] = [rng[iv].min for iv in op.axis]
            elif id(st) not in self.buffers:
                self.buffers[id(st)] = Buffer(st.name, op.shape, op.dtype, st.scope)
        for st in schedule.stages:
            if st.storage is not None and id(st) in self.buffers:
                check_store_in(schedule, bounds, st)
                self.buffers[id(st)] = self.buffers[id(st.storage)]
                del self.offsets[id(st)]        # indexed as the output is: whole-tensor indices

    def _has_code(self, st: Stage) -> bool:
        """Computes that are not inlined (they have inferred bounds) and extern ops."""
        return id(st) in self.bounds.ranges or isinstance(st.op, ExternOp)

    def build(self) -> Stmt:
        roots = [st for st in self.schedule.stages
                 if self._has_code(st) and st.attach == "root" and id(st) in self.needed]
        body = seq(*(self.extern_body(st) if isinstance(st.op, ExternOp) else self.stage_nest(st) for st in roots))
        for st in reversed(roots):
            buf = self.buffers[id(st)]
            if buf not in self.params:
                body = Allocate(buf, body)
        return body

    # -- accesses -------------------------------------------------------------------------------
    def access(self, expr: Expr) -> Expr:
        """Tensor reads -> flat loads of the producing stage's buffer; if_then_else reads predicated."""

        def post(n: object) -> Expr | None:
            if isinstance(n, TensorLoad):
                st = self.schedule[n.tensor]
                buf = self.buffers.get(id(st))
                if buf is None:
                    raise ScheduleError(f"tensor {n.tensor.name} is read but is neither in args nor computed")
                offs = self.offsets.get(id(st))
                idx = n.indices if offs is None else [i - o for i, o in zip(n.indices, offs)]
                return Load(buf, flat_index(buf.shape, idx))
            if isinstance(n, Select):
                return Select(n.cond, _predicate_loads(n.t, n.cond), _predicate_loads(n.f, Not(n.cond)))
            return None

        return transform(expr, post)

    def extern_body(self, st: Stage) -> Stmt:
        """The hand-written IR of an extern stage over its inputs' (whole, root) buffers."""
        op: ExternOp = st.op  # type: ignore[assignment]
        body = op.build([self.buffers[id(self.schedule[t])] for t in op.inputs], self.buffers[id(st)])
        if not isinstance(body, Stmt):
            raise TypeError(f"extern {op.name}: its build function returned {type(body).__name__}, not a statement")
        return body

    # -- one stage --------------------------------------------------------------------------------
    def stage_nest(self, st: Stage) -> Stmt:
        op: ComputeOp = st.op  # type: ignore[assignment]
        ext = self.bounds.extents[id(st)]
        rng = self.bounds.ranges[id(st)]
        leaves = list(st.leaf_iter_vars)
        offset = pass_up(st, ext, {iv: iv.var for iv in leaves})
        subst = {iv.var: rng[iv].min + offset[iv] for iv in rng}
        buf = self.buffers[id(st)]
        in_output = st.storage is not None      # indexed as the output is, not from the region's start
        out_index = flat_index(buf.shape, [rng[iv].min + offset[iv] if in_output else offset[iv] for iv in op.axis])
        guards = self._guards(st, offset, ext, rng)
        body = substitute(self.bounds.body(st), subst)
        if not isinstance(body, Reduce):
            store = Store(buf, out_index, self.access(body))
            return self._loops(st, leaves, [iv.var for iv in leaves], store, guards, with_top=True)
        return self._reduction(st, leaves, body, buf, out_index, guards)

    def _guards(self, st: Stage, offset: dict[IterVar, Expr], ext: dict[IterVar, int],
                rng: dict) -> list[Expr]:
        leaf_ranges = {iv.var: (0, ext[iv] - 1) for iv in st.leaf_iter_vars}
        conds: list[Expr] = []
        leaves, roots = set(st.leaf_iter_vars), set(rng)
        for iv in st.all_iter_vars:                  # split/fused axes split again with a tail
            if iv in leaves or iv in roots:
                continue
            b = const_bound(offset[iv], leaf_ranges)
            if b is None or b[1] > ext[iv] - 1:
                conds.append(offset[iv] < ext[iv])
        for iv, r in rng.items():
            b = const_bound(offset[iv], leaf_ranges)
            if b is None or b[1] > r.extent - 1:
                conds.append(offset[iv] < r.extent)               # split tail
            if st.attach == "scope" and iv.kind == "data":
                conds.append(r.min + offset[iv] < iv.dom_min + iv.extent)   # region past the tensor
                conds.append(r.min + offset[iv] >= iv.dom_min)
        return conds

    def _reduction(self, st: Stage, leaves: list[IterVar], body: Reduce, buf: Buffer,
                   out_index: Expr, guards: list[Expr]) -> Stmt:
        first = next(p for p, iv in enumerate(leaves) if iv.kind == "reduce")
        common, rest = leaves[:first], leaves[first:]
        src = self.access(body.source)
        if body.condition is not None:          # its loads predicated too: a row tail reads no further
            cond = self.access(body.condition)
            src = Select(cond, _predicate_loads(src, cond), reduce_identity(body.combiner, body.dtype))

        def is_common(g: Expr) -> bool:
            return not any(uses_var(g, iv.var) for iv in rest)

        threads = [st.attr_of(iv).thread for iv in rest if st.attr_of(iv).kind == "bind"]
        if threads:
            return self._cross_thread_reduction(st, common, rest, body, src, buf, out_index, guards,
                                                threads, is_common)
        update = Store(buf, out_index, combine(body.combiner, Load(buf, out_index), src))
        reduce_vars = [iv.var for iv in rest if iv.kind == "reduce"]

        update_nest = self._loops(st, rest, [iv.var for iv in rest], update,
                                  [g for g in guards if not is_common(g)], with_top=False)
        init_leaves = [iv for iv in rest if iv.kind == "data"]
        fresh = {iv.var: Var(iv.var.name) for iv in init_leaves}
        init_guards = [substitute(g, fresh) for g in guards
                       if not is_common(g) and not any(uses_var(g, v) for v in reduce_vars)]
        init = Store(buf, substitute(out_index, fresh), reduce_identity(body.combiner, body.dtype))
        init_nest = self._loops(st, init_leaves, [fresh[iv.var] for iv in init_leaves], init, init_guards,
                                with_top=False, attach=False)
        return self._loops(st, common, [iv.var for iv in common], seq(init_nest, update_nest),
                           [g for g in guards if is_common(g)], with_top=True)

    def _cross_thread_reduction(self, st: Stage, common: list[IterVar], rest: list[IterVar], body: Reduce,
                                src: Expr, buf: Buffer, out_index: Expr, guards: list[Expr], threads: list,
                                is_common) -> Stmt:
        """A reduction with an axis bound to threads (TVM's cross-thread reduction): each thread
        accumulates its share in a local, the threads combine their locals (ThreadAllReduce),
        then the total is stored."""
        where = f"{st.name}: reduction over {threads[0].thread_tag}"
        if any(iv.kind != "reduce" for iv in rest):
            raise ScheduleError(f"{where}: every loop inside the first reduction loop must be a reduction "
                                "loop; reorder the data axes outside")
        if len(threads) > 1 or threads[0].thread_tag != "threadIdx.x":
            tags = ", ".join(t.thread_tag for t in threads)
            raise ScheduleError(f"{st.name}: a reduction axis may be bound to threadIdx.x only, got {tags}")
        acc = Buffer(f"{st.name}.red", (1,), body.dtype, "local")
        zero = Const(0, "int32")
        update = Store(acc, zero, combine(body.combiner, Load(acc, zero), src))
        update_nest = self._loops(st, rest, [iv.var for iv in rest], update,
                                  [g for g in guards if not is_common(g)], with_top=False)
        inner = Allocate(acc, seq(Store(acc, zero, reduce_identity(body.combiner, body.dtype)), update_nest,
                                  ThreadAllReduce(acc, body.combiner, "threadIdx.x"),
                                  Store(buf, out_index, Load(acc, zero))))
        return self._loops(st, common, [iv.var for iv in common], inner,
                           [g for g in guards if is_common(g)], with_top=True)

    def _loops(self, st: Stage, leaves: list[IterVar], loop_vars: list[Var], inner: Stmt,
               guards: list[Expr], with_top: bool, attach: bool = True) -> Stmt:
        """Loops over `leaves` around `inner`; each guard at the outermost loop binding its vars."""
        depth = {id(g): max((p for p, v in enumerate(loop_vars) if uses_var(g, v)), default=-1) for g in guards}
        attached = [a for a in self.schedule.stages if a.attach == "scope" and a.attach_stage is st
                    and id(a) in self.bounds.ranges] if attach else []
        ext = self.bounds.extents[id(st)]
        body = inner
        for pos in reversed(range(len(leaves))):
            iv = leaves[pos]
            body = self._with_attached([a for a in attached if a.attach_ivar is iv], body)
            body = self._guarded(body, [g for g in guards if depth[id(g)] == pos])
            attr = st.attr_of(iv)
            body = self._with_prefetches(st, iv, loop_vars[pos], attr.prefetch, body)
            thread = attr.thread.thread_tag if attr.thread is not None else None
            body = For(loop_vars[pos], ext[iv], _KINDS[attr.kind], body, thread)
        top = [g for g in guards if depth[id(g)] == -1]
        return self._guarded(body, top) if with_top or top else body

    def _with_prefetches(self, st: Stage, iv: IterVar, var: Var, requests: list[tuple[Tensor, int]],
                         body: Stmt) -> Stmt:
        """`body` after the Prefetch statements of `Stage.prefetch` requests on axis iv."""
        fetches = [p for tensor, offset in requests
                   for p in prefetches(body, self.buffers[id(self.schedule[tensor])], var, offset,
                                       f"prefetch of {tensor.name} at {st.name}.{iv.name}")]
        return seq(*fetches, body) if fetches else body

    @staticmethod
    def _guarded(body: Stmt, conds: list[Expr]) -> Stmt:
        if not conds:
            return body
        cond = conds[0]
        for c in conds[1:]:
            cond = And(cond, c)
        return IfThenElse(cond, body)

    def _with_attached(self, stages: list[Stage], body: Stmt) -> Stmt:
        if not stages:
            return body
        out = seq(*(self.stage_nest(a) for a in stages), body)
        for a in reversed(stages):
            if a.storage is None:
                out = Allocate(self.buffers[id(a)], out)
        return out


def needed_stages(schedule: Schedule, given: Sequence[Tensor]) -> set[int]:
    """Ids of the stages a function computes when the `given` stages are its inputs: those the
    outputs read, not through a given stage. A given tensor must be a compute stage at root (an
    inlined or attached one has no buffer of its own to pass)."""
    stop = set()
    for t in given:
        st = schedule[t]
        what = ("not a compute" if not isinstance(st.op, ComputeOp) else "an output" if st.is_output
                else {"inline": "inlined", "scope": "attached with compute_at"}.get(st.attach))
        if what is not None:
            raise ScheduleError(f"given {t.name}: only a compute stage at root that is not an output can be "
                                f"given, it is {what}")
        stop.add(id(st))
    needed: set[int] = set()
    todo = [st for st in schedule.stages if st.is_output]
    while todo:
        st = todo.pop()
        if id(st) in needed or id(st) in stop:
            continue
        needed.add(id(st))
        todo.extend(schedule[t] for t in st.op.input_tensors)
    for st in schedule.stages:
        at = st.attach_stage
        if id(st) in needed and at is not None and id(at) not in needed:
            raise ScheduleError(f"{st.name} is attached to {at.name}, which is given: it would never be computed")
    return needed


def param_buffers(schedule: Schedule, args: Sequence[Tensor], given: Sequence[Tensor], needed: set[int]
                  ) -> tuple[dict[int, Buffer], list[Buffer], tuple[int, ...]]:
    """One global buffer per argument; checks args against the schedule (inputs, given stages and
    outputs: the positions of the outputs are returned)."""
    given_ids = {id(schedule[t]) for t in given}
    params: dict[int, Buffer] = {}
    order: list[Buffer] = []
    outputs: list[int] = []
    for pos, t in enumerate(args):
        if not isinstance(t, Tensor):
            raise TypeError(f"args[{pos}]: expected a te Tensor, got {type(t).__name__}")
        if t not in schedule:
            raise ValueError(f"args[{pos}]: tensor {t.name} is not part of this schedule")
        st = schedule[t]
        if id(st) in params:
            raise ValueError(f"args[{pos}]: tensor {t.name} is passed twice")
        if isinstance(st.op, ComputeOp) and st.attach != "root":
            raise ValueError(f"args[{pos}]: tensor {t.name} is {st.attach}d, so it has no buffer of its own")
        buf = Buffer(t.name, t.shape, t.dtype, "global")
        params[id(st)] = buf
        order.append(buf)
        if not isinstance(st.op, PlaceholderOp) and id(st) not in given_ids:
            outputs.append(pos)
    for st in schedule.stages:
        if st.is_output and id(st) not in params:
            raise ValueError(f"output {st.name} is missing from args")
        if id(st) in given_ids and id(st) not in params:
            raise ValueError(f"given {st.name} is missing from args")
        if isinstance(st.op, PlaceholderOp) and id(st) not in params and any(
                id(r) in needed for r in schedule.readers(st)):
            raise ValueError(f"input {st.name} is read but missing from args")
    return params, order, tuple(outputs)
