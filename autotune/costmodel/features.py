"""Fixed-length feature vectors of lowered loop IR: the cost model's only view of a candidate.

`extract(func, knobs)` returns `FEATURE_LEN` float32 values; `feature_names()` names them. The
length never depends on the program (AutoTVM's variable-length rows break its model when loop
nests differ), so rows of any workload stack into one matrix. Magnitudes are log-scaled,
`lg(x) = log2(1 + x)`; flags are 0/1; absent slots are 0.

How the IR is read
------------------
* Every Store runs `prod(extents of enclosing loops)` times; both branches of an IfThenElse
  count as executed (a tail guard's scalar path is counted in full, like its vector path).
* Unrolled copies: stores with the same buffer, loop extents/kinds and branch side (then or
  else of a guard) are copies of one *template* (what the unroll pass leaves). The first
  `_ANALYZE` copies are analysed and the rest only counted, which keeps extraction fast on
  heavily unrolled bodies; beyond that, a buffer's distinct offsets across copies are
  extrapolated (kept if the second half of the analysed copies added none, else scaled).
* The *hot nest* is the template with the most executed work (lanes + float ops). Its levels
  are its real loops, then a virtual UNROLLED level (extent = copies, if > 1), then a virtual
  VECTORIZED level (extent = lanes, if > 1): the nest as the schedule wrote it.
* An index is read as an affine form of the loop variables (x // c scales by 1/c, x % c and
  min/max keep the varying operand): its coefficients are the strides per level.

Feature groups (level slot 0 is the innermost level of the hot nest; {i} < MAX_LOOPS,
{b} < MAX_BUFFERS, {k} < MAX_KNOBS)
--------------------------------------------------------------------------------------------
| names                                  | meaning                                         |
|----------------------------------------|-------------------------------------------------|
| loop{i}.extent                         | lg(extent)                                      |
| loop{i}.is_serial, is_parallel,        | kind one-hot (unrolled/vectorized are the       |
|   is_unrolled, is_vectorized, is_thread|   virtual levels; thread = GPU-bound loop)      |
| loop{i}.depth                          | position from the outermost level (0-based)     |
| loop{i}.prod_above, prod_below         | lg(product of extents outside / inside it)      |
| loop{i}.working_set                    | lg(bytes all hot buffers touch in one iteration |
|                                        |   of the level: what has to stay in cache)      |
| buf{b}.bytes                           | lg(bytes moved by its accesses over the run)    |
| buf{b}.footprint                       | lg(distinct bytes the whole hot nest touches)   |
| buf{b}.stride                          | lg(innermost stride in elements): 0 broadcast,  |
|                                        |   1 contiguous, larger strided                  |
| buf{b}.is_vector, lanes                | vector access; lg(its lanes)                    |
| buf{b}.is_store, is_local, is_gather   | written; local scope; per-lane or indirect addr |
| buf{b}.reuse{i}                        | lg(iterations of level i touching the same      |
|                                        |   elements: its index does not use the level)   |
| buf{b}.touch{i}                        | lg(bytes touched by one iteration of level i)   |
| flops, int_ops                         | lg(float ops), lg(integer ops incl. addressing) |
| global_bytes                           | lg(bytes moved to/from global buffers)          |
| intensity                              | lg(flops / global_bytes)                        |
| intensity_compulsory                   | lg(flops / bytes of the global buffers used)    |
| n_parallel, parallel_extent            | parallel/thread-bound loops in the function;    |
|                                        |   lg(their extent product in the hot nest)      |
| parallel_frac, vector_frac             | share of flops under a parallel loop / in       |
|                                        |   vector statements                             |
| vector_lanes                           | lg(lanes of the hot nest's store)               |
| n_local_alloc, local_bytes             | local allocations; lg(their bytes)              |
| n_other_alloc, other_bytes             | global/shared temporaries; lg(their bytes)      |
| n_guards, inner_guards                 | lg(IfThenElse count), lg(those with no loop     |
|                                        |   inside: guards in the innermost loops)        |
| inner_guard_evals                      | lg(executions of those guards and predicates)   |
| hot_guards, else_frac                  | guard depth at the hot store; share of flops in |
|                                        |   else branches (scalar tail paths)             |
| n_gathers, gather_elems                | lg(gather/scatter accesses), lg(their elements) |
| n_stores, n_loops, n_nests             | lg(static stores), lg(static loops), top-level  |
|                                        |   statements (stages)                           |
| hot_depth, unroll, hot_frac            | real loops of the hot nest; lg(its copies); its |
|                                        |   share of flops                                |
| knob{k}                                | the knob values as given, padded with zeros or  |
|                                        |   truncated to MAX_KNOBS                        |
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..dtype import dtype_info
from ..ir.nodes import (Allocate, Broadcast, For, ForKind, IfThenElse, Let, Load, PrimFunc, Ramp,
                        Seq, Store)
from ..te.expr import And, Binary, BinOp, Call, Cast, Compare, Const, Not, Or, Select, Var

MAX_LOOPS = 8
MAX_BUFFERS = 5
MAX_KNOBS = 16
_ANALYZE = 32  # copies analysed per template (exact up to 32 unrolled copies); the rest are counted

_KINDS = ("serial", "parallel", "unrolled", "vectorized", "thread")
_PARALLEL = (ForKind.PARALLEL, ForKind.THREAD_BOUND)
_KIND_OF = {ForKind.SERIAL: "serial", ForKind.PARALLEL: "parallel", ForKind.UNROLLED: "unrolled",
            ForKind.VECTORIZED: "vectorized", ForKind.THREAD_BOUND: "thread"}
_LOOP_FIELDS = ("extent", *(f"is_{k}" for k in _KINDS), "depth", "prod_above", "prod_below",
                "working_set")
_BUF_FIELDS = ("bytes", "footprint", "stride", "is_vector", "lanes", "is_store", "is_local",
               "is_gather", *(f"reuse{i}" for i in range(MAX_LOOPS)),
               *(f"touch{i}" for i in range(MAX_LOOPS)))
_FUNC_FIELDS = ("flops", "int_ops", "global_bytes", "intensity", "intensity_compulsory",
                "n_parallel", "parallel_extent", "parallel_frac", "vector_frac", "vector_lanes",
                "n_local_alloc", "local_bytes", "n_other_alloc", "other_bytes", "n_guards",
                "inner_guards", "inner_guard_evals", "hot_guards", "else_frac", "n_gathers",
                "gather_elems", "n_stores", "n_loops", "n_nests", "hot_depth", "unroll", "hot_frac")

_NAMES = ([f"loop{i}.{f}" for i in range(MAX_LOOPS) for f in _LOOP_FIELDS]
          + [f"buf{b}.{f}" for b in range(MAX_BUFFERS) for f in _BUF_FIELDS]
          + list(_FUNC_FIELDS) + [f"knob{k}" for k in range(MAX_KNOBS)])
FEATURE_LEN = len(_NAMES)
_LOOP_AT, _BUF_AT = 0, MAX_LOOPS * len(_LOOP_FIELDS)
_FUNC_AT = _BUF_AT + MAX_BUFFERS * len(_BUF_FIELDS)
_KNOB_AT = _FUNC_AT + len(_FUNC_FIELDS)


def feature_names() -> list[str]:
    """Names of the `FEATURE_LEN` features, in vector order."""
    return list(_NAMES)


def lg(x: float) -> float:
    return math.log2(1.0 + max(x, 0.0))


# ---- expressions: affine index forms and operation counts -------------------------------------

@dataclass(slots=True)
class _Aff:
    """An index as sum(coef[v] * v) + const; vector lanes step by `lane_stride`."""

    coef: dict
    const: float = 0.0
    lane_stride: float = 0.0
    lanes: int = 1
    data_dependent: bool = False   # the index reads memory (indirect access)


def _aff(e, memo: dict) -> _Aff:
    r = memo.get(id(e))
    if r is None:
        r = memo[id(e)] = _aff_new(e, memo)
    return r


def _aff_new(e, memo: dict) -> _Aff:
    t = type(e)
    if t is Const:
        return _Aff({}, float(e.value))
    if t is Var:
        return _Aff({e: 1.0})
    if t is Ramp:
        base, step = _aff(e.base, memo), _aff(e.stride, memo)
        return _Aff(base.coef, base.const, step.const, e.lanes, base.data_dependent)
    if t is Broadcast:
        v = _aff(e.value, memo)
        return _Aff(v.coef, v.const, 0.0, e.lanes, v.data_dependent)
    if t is Cast:
        return _aff(e.value, memo)
    if t is Load:
        inner = _aff(e.index, memo)
        return _Aff({v: 1.0 for v in inner.coef}, 0.0, 0.0, inner.lanes, True)
    if t is Binary:
        a, b = _aff(e.a, memo), _aff(e.b, memo)
        op = e.op
        if op is BinOp.ADD or op is BinOp.SUB:
            k = 1.0 if op is BinOp.ADD else -1.0
            coef = dict(a.coef)
            for v, c in b.coef.items():
                coef[v] = coef.get(v, 0.0) + k * c
            return _Aff(coef, a.const + k * b.const, a.lane_stride + k * b.lane_stride,
                        max(a.lanes, b.lanes), a.data_dependent or b.data_dependent)
        if op is BinOp.MUL:
            if b.coef or b.lane_stride:     # keep the varying operand in a
                a, b = b, a
            k = b.const if not b.coef else 1.0   # var * var: strides unknown, keep the vars
            return _Aff({v: c * k for v, c in a.coef.items()} | {v: 1.0 for v in b.coef},
                        a.const * k, a.lane_stride * k, max(a.lanes, b.lanes),
                        a.data_dependent or b.data_dependent)
        if op is BinOp.FLOORDIV and not b.coef and b.const > 0:
            c = b.const
            return _Aff({v: x / c for v, x in a.coef.items()}, a.const // c, a.lane_stride / c,
                        a.lanes, a.data_dependent)
        if op is BinOp.FLOORMOD and not b.coef and b.const > 0:
            return _Aff(a.coef, a.const % b.const, a.lane_stride, a.lanes, a.data_dependent)
        # min/max (clamps) and anything else: follow the operand that varies
        return a if (a.coef or a.lane_stride or not (b.coef or b.lane_stride)) else b
    if t is Select:
        return _aff(e.t, memo)
    return _Aff({})


def _is_gather(index, lanes: int, aff: _Aff) -> bool:
    """Per-lane addressing in the codegen: not a splat and not a unit-stride Ramp."""
    if aff.data_dependent:
        return True
    if lanes == 1 or type(index) is Broadcast:
        return False
    return not (type(index) is Ramp and type(index.stride) is Const and index.stride.value == 1)


_FLOAT_KIND = {}


def _is_float(dtype: str) -> bool:
    r = _FLOAT_KIND.get(dtype)
    if r is None:
        r = _FLOAT_KIND[dtype] = dtype_info(dtype).kind == "float"
    return r


def _ops(e, memo: dict) -> tuple[float, float, tuple, int]:
    """(float ops, integer ops, loads, lanes) of one evaluation of `e`; shared subtrees memoised."""
    r = memo.get(id(e))
    if r is not None:
        return r
    t = type(e)
    if t is Load:
        f, i, loads, lanes = _ops(e.index, memo)
        r = (f, i, loads + (e,), lanes)
    elif t is Binary or t is Compare or t is Call or t is Select or t is Cast or t is Ramp \
            or t is Broadcast or t is Not or t is And or t is Or:
        f = i = 0.0
        loads: tuple = ()
        lanes = 1
        for c in _expr_children(e, t):
            cf, ci, cl, cn = _ops(c, memo)
            f, i, loads, lanes = f + cf, i + ci, loads + cl, max(lanes, cn)
        if t is Ramp or t is Broadcast:
            lanes = e.lanes_
        elif t is Binary or t is Call or t is Compare:
            if _is_float(e.a.dtype if t is Compare else e.dtype):
                f += lanes
            else:
                i += lanes
        r = (f, i, loads, lanes)
    else:   # Var, Const
        r = (0.0, 0.0, (), 1)
    memo[id(e)] = r
    return r


def _expr_children(e, t) -> tuple:
    if t is Binary or t is Compare or t is And or t is Or:
        return (e.a, e.b)
    if t is Call:
        return e.args
    if t is Select:
        return (e.cond, e.t, e.f)
    if t is Cast or t is Broadcast:
        return (e.value,)
    if t is Ramp:
        return (e.base, e.stride)
    return (e.a,)  # Not


# ---- statements: templates of stores with their execution counts ------------------------------

@dataclass(slots=True)
class _Access:
    buffer: object
    aff: _Aff
    lanes: int
    is_store: bool
    gather: bool
    levels: tuple   # loop vars of the copy, outermost first (maps coef to levels)


@dataclass(slots=True)
class _Template:
    loops: tuple           # For nodes of the first copy, outermost first
    lanes: int
    count: float           # executions of one copy
    guards: int            # deepest guard nesting seen over the copies
    in_else: bool
    copies: int = 0
    flops: float = 0.0     # summed over analysed copies
    int_ops: float = 0.0
    accesses: list = field(default_factory=list)   # per analysed copy: list[_Access]


@dataclass(slots=True)
class _Walk:
    templates: dict = field(default_factory=dict)
    memo_ops: dict = field(default_factory=dict)
    memo_aff: dict = field(default_factory=dict)
    n_loops: int = 0
    n_parallel: int = 0
    n_guards: int = 0
    inner_guards: int = 0
    inner_guard_evals: float = 0.0
    allocs: list = field(default_factory=list)   # (scope, bytes)


def _visit(s, loops: tuple, sig: tuple, count: float, guards: int, in_else: bool, w: _Walk) -> bool:
    """Record the stores under `s`; returns whether `s` contains a loop."""
    t = type(s)
    if t is For:
        w.n_loops += 1
        w.n_parallel += s.kind in _PARALLEL
        _visit(s.body, loops + (s,), sig + ((s.extent, s.kind),), count * s.extent, guards,
               in_else, w)
        return True
    if t is Seq:
        has = False
        for x in s.stmts:
            has = _visit(x, loops, sig, count, guards, in_else, w) or has
        return has
    if t is IfThenElse:
        w.n_guards += 1
        has = _visit(s.then_case, loops, sig, count, guards + 1, in_else, w)
        if s.else_case is not None:
            has = _visit(s.else_case, loops, sig, count, guards + 1, True, w) or has
        if not has and loops:
            w.inner_guards += 1
            w.inner_guard_evals += count
        return has
    if t is Allocate:
        b = s.buffer
        w.allocs.append((b.scope, b.size * dtype_info(b.dtype).bytes))
        return _visit(s.body, loops, sig, count, guards, in_else, w)
    if t is Let:
        return _visit(s.body, loops, sig, count, guards, in_else, w)
    if t is Store:
        _record_store(s, loops, sig, count, guards, in_else, w)
    return False


def _record_store(s: Store, loops: tuple, sig: tuple, count: float, guards: int, in_else: bool,
                  w: _Walk) -> None:
    key = (id(s.buffer), sig, in_else)
    tpl = w.templates.get(key)
    if tpl is None:
        tpl = w.templates[key] = _Template(loops, 1, count, guards, in_else)
    tpl.copies += 1
    tpl.guards = max(tpl.guards, guards)
    if s.predicate is not None and loops:
        w.inner_guard_evals += count
    if tpl.copies > _ANALYZE:
        return
    f, i, loads, _ = _ops(s.value, w.memo_ops)
    fi, ii, iloads, lanes = _ops(s.index, w.memo_ops)
    tpl.flops += f + fi
    tpl.int_ops += i + ii
    tpl.lanes = max(tpl.lanes, lanes)
    levels = tuple(lp.var for lp in loops)
    acc = []
    for node, is_store in [(ld, False) for ld in loads + iloads] + [(s, True)]:
        aff = _aff(node.index, w.memo_aff)
        acc.append(_Access(node.buffer, aff, aff.lanes, is_store,
                           _is_gather(node.index, aff.lanes, aff), levels))
    tpl.accesses.append(acc)


# ---- the hot nest: levels and per-buffer access features --------------------------------------

@dataclass(slots=True)
class _Level:
    extent: int
    kind: str
    depth: int | None   # position among the real loops; None for the virtual levels


def _hot_levels(tpl: _Template) -> list[_Level]:
    levels = [_Level(lp.extent, _KIND_OF[lp.kind], d) for d, lp in enumerate(tpl.loops)]
    if tpl.copies > 1:
        levels.append(_Level(tpl.copies, "unrolled", None))
    lanes = max([tpl.lanes] + [a.lanes for acc in tpl.accesses for a in acc])
    if lanes > 1:
        levels.append(_Level(lanes, "vectorized", None))
    return levels


@dataclass(slots=True)
class _BufStats:
    name: str
    moved: float          # bytes over the whole run
    stride: float
    lanes: int
    is_store: bool
    is_local: bool
    gather: bool
    reuse: list           # per level, outermost first
    touch: list           # bytes per level, outermost first


def _distinct_offsets(accs: list, analysed: int, copies: int) -> tuple[float, float, list]:
    """Distinct index offsets among the analysed copies, extrapolated to all copies."""
    offsets = sorted({(a.aff.const, a.aff.lane_stride) for a, _ in accs})
    half = {(a.aff.const, a.aff.lane_stride) for a, k in accs if 2 * k < analysed}
    grow = 1.0 if copies <= analysed or len(half) == len(offsets) else copies / analysed
    consts = sorted({o[0] for o in offsets})
    return len(offsets) * grow, (consts[-1] - consts[0]) * grow, consts


def _coef_by_depth(accs: list) -> dict[int, float]:
    """|stride| per loop depth (copies in sibling loops have their own vars, same depths)."""
    coef: dict[int, float] = {}
    for a, _ in accs:
        depth_of = {v: d for d, v in enumerate(a.levels)}
        for v, c in a.aff.coef.items():
            d = depth_of.get(v)
            if d is not None:
                coef[d] = max(coef.get(d, 0.0), abs(c))
    return coef


def _buffer_stats(buf, accs: list, tpl: _Template, levels: list[_Level]) -> _BufStats:
    """Strides, reuse and footprint of one buffer's accesses in the hot template."""
    analysed = min(tpl.copies, _ANALYZE)
    elem = dtype_info(buf.dtype).bytes
    coef = _coef_by_depth(accs)
    lanes = max(a.lanes for a, _ in accs)
    lane_stride = max((abs(a.aff.lane_stride) for a, _ in accs if a.lanes > 1), default=0.0)
    d, span_u, consts = _distinct_offsets(accs, analysed, tpl.copies)
    factors, spans, reuse = [], [], []
    for lv in levels:
        if lv.depth is not None:
            c = coef.get(lv.depth, 0.0)
            factors.append(lv.extent if c else 1)
            spans.append(c * (lv.extent - 1))
            reuse.append(1 if c else lv.extent)
        elif lv.kind == "unrolled":
            factors.append(d)
            spans.append(span_u)
            reuse.append(max(tpl.copies / d, 1.0))
        else:
            factors.append(lanes if lane_stride else 1)
            spans.append(lane_stride * (lanes - 1))
            reuse.append(1 if lane_stride else lv.extent)
    touch, prod, span = [0.0] * len(levels), 1.0, 0.0
    for j in range(len(levels) - 1, -1, -1):
        prod, span = prod * factors[j], span + spans[j]
        touch[j] = min(prod, span + 1, buf.size) * elem
    if levels and levels[-1].kind == "vectorized":
        stride = lane_stride
    elif levels and levels[-1].kind == "unrolled":
        stride = min((b - a for a, b in zip(consts, consts[1:])), default=0.0)
    elif levels:
        stride = coef.get(levels[-1].depth, 0.0)
    else:
        stride = 0.0
    scale = tpl.copies / analysed
    moved = sum(a.lanes for a, _ in accs) * elem * tpl.count * scale
    return _BufStats(buf.name, moved, stride, lanes, any(a.is_store for a, _ in accs),
                     buf.scope == "local", any(a.gather for a, _ in accs), reuse, touch)


def _hot_buffers(tpl: _Template, levels: list[_Level]) -> list[_BufStats]:
    by_buf: dict = {}
    for k, acc in enumerate(tpl.accesses):
        for a in acc:
            by_buf.setdefault(id(a.buffer), (a.buffer, []))[1].append((a, k))
    stats = [_buffer_stats(b, accs, tpl, levels) for b, accs in by_buf.values()]
    stats.sort(key=lambda s: (-(s.touch[0] if s.touch else 0.0), -s.moved, s.name, s.is_store))
    return stats


# ---- assembling the vector ---------------------------------------------------------------------

def _fill_levels(out: np.ndarray, levels: list[_Level], bufs: list[_BufStats]) -> None:
    """Loop-level and per-buffer slots; slot i holds the i-th level counted from the innermost."""
    n, extents = len(levels), [lv.extent for lv in levels]
    for i in range(min(n, MAX_LOOPS)):
        j = n - 1 - i
        row = {"extent": lg(extents[j]), f"is_{levels[j].kind}": 1.0, "depth": j,
               "prod_above": lg(math.prod(extents[:j])), "prod_below": lg(math.prod(extents[j + 1:])),
               "working_set": lg(sum(b.touch[j] for b in bufs))}
        base = _LOOP_AT + i * len(_LOOP_FIELDS)
        for name, value in row.items():
            out[base + _LOOP_FIELDS.index(name)] = value
    for b, s in enumerate(bufs[:MAX_BUFFERS]):
        row = {"bytes": lg(s.moved), "footprint": lg(s.touch[0] if s.touch else 0.0),
               "stride": lg(s.stride), "is_vector": float(s.lanes > 1), "lanes": lg(s.lanes),
               "is_store": float(s.is_store), "is_local": float(s.is_local),
               "is_gather": float(s.gather)}
        for i in range(min(n, MAX_LOOPS)):
            row[f"reuse{i}"] = lg(s.reuse[n - 1 - i])
            row[f"touch{i}"] = lg(s.touch[n - 1 - i])
        base = _BUF_AT + b * len(_BUF_FIELDS)
        for name, value in row.items():
            out[base + _BUF_FIELDS.index(name)] = value


def _n_nests(body) -> int:
    while type(body) in (Allocate, Let):
        body = body.body
    return len(body.stmts) if type(body) is Seq else 1


@dataclass(slots=True)
class _Totals:
    flops: float = 0.0
    int_ops: float = 0.0
    global_bytes: float = 0.0
    parallel_flops: float = 0.0
    vector_flops: float = 0.0
    else_flops: float = 0.0
    hot_flops: float = 0.0
    gathers: float = 0.0
    gather_elems: float = 0.0
    compulsory: float = 0.0     # bytes of the distinct global buffers accessed


def _totals(w: _Walk, hot: _Template | None) -> _Totals:
    """Whole-run sums over all templates (analysed copies scaled to all copies)."""
    t, global_bufs = _Totals(), {}
    for tpl in w.templates.values():
        analysed = min(tpl.copies, _ANALYZE)
        scale = tpl.copies / analysed * tpl.count
        f = tpl.flops * scale
        t.flops, t.int_ops = t.flops + f, t.int_ops + tpl.int_ops * scale
        t.parallel_flops += f if any(lp.kind in _PARALLEL for lp in tpl.loops) else 0.0
        t.vector_flops += f if tpl.lanes > 1 else 0.0
        t.else_flops += f if tpl.in_else else 0.0
        t.hot_flops += f if tpl is hot else 0.0
        for a in (a for acc in tpl.accesses for a in acc):
            if a.buffer.scope == "global":
                t.global_bytes += a.lanes * dtype_info(a.buffer.dtype).bytes * scale
                global_bufs[id(a.buffer)] = a.buffer
            if a.gather:
                t.gathers += tpl.copies / analysed
                t.gather_elems += a.lanes * scale
    t.compulsory = sum(b.size * dtype_info(b.dtype).bytes for b in global_bufs.values())
    return t


def _func_features(func: PrimFunc, w: _Walk, hot: _Template | None) -> list[float]:
    t = _totals(w, hot)
    share = (lambda x: x / t.flops) if t.flops > 0 else (lambda x: 0.0)
    hot_par = [lp.extent for lp in hot.loops if lp.kind in _PARALLEL] if hot else []
    local = [b for scope, b in w.allocs if scope == "local"]
    other = [b for scope, b in w.allocs if scope != "local"]
    row = {
        "flops": lg(t.flops), "int_ops": lg(t.int_ops), "global_bytes": lg(t.global_bytes),
        "intensity": lg(t.flops / t.global_bytes if t.global_bytes else 0.0),
        "intensity_compulsory": lg(t.flops / t.compulsory if t.compulsory else 0.0),
        "n_parallel": w.n_parallel, "parallel_extent": lg(math.prod(hot_par) if hot_par else 0),
        "parallel_frac": share(t.parallel_flops), "vector_frac": share(t.vector_flops),
        "vector_lanes": lg(hot.lanes if hot else 0),
        "n_local_alloc": len(local), "local_bytes": lg(sum(local)),
        "n_other_alloc": len(other), "other_bytes": lg(sum(other)),
        "n_guards": lg(w.n_guards), "inner_guards": lg(w.inner_guards),
        "inner_guard_evals": lg(w.inner_guard_evals), "hot_guards": hot.guards if hot else 0,
        "else_frac": share(t.else_flops), "n_gathers": lg(t.gathers),
        "gather_elems": lg(t.gather_elems),
        "n_stores": lg(sum(x.copies for x in w.templates.values())), "n_loops": lg(w.n_loops),
        "n_nests": _n_nests(func.body), "hot_depth": len(hot.loops) if hot else 0,
        "unroll": lg(hot.copies if hot else 0), "hot_frac": share(t.hot_flops),
    }
    return [row[name] for name in _FUNC_FIELDS]


def _hottest(w: _Walk) -> _Template | None:
    best, best_work = None, -1.0
    for tpl in w.templates.values():
        analysed = min(tpl.copies, _ANALYZE)
        work = tpl.count * tpl.copies * (tpl.lanes + tpl.flops / analysed)
        if work > best_work:
            best, best_work = tpl, work
    return best


def extract(func: PrimFunc, knobs: Sequence[float] = ()) -> np.ndarray:
    """The `FEATURE_LEN` float32 features of a lowered function (see the module table)."""
    w = _Walk()
    _visit(func.body, (), (), 1.0, 0, False, w)
    out = np.zeros(FEATURE_LEN, dtype=np.float64)
    hot = _hottest(w)
    if hot is not None:
        levels = _hot_levels(hot)
        _fill_levels(out, levels, _hot_buffers(hot, levels))
    out[_FUNC_AT:_KNOB_AT] = _func_features(func, w, hot)
    k = np.asarray(list(knobs)[:MAX_KNOBS], dtype=np.float64)
    out[_KNOB_AT:_KNOB_AT + len(k)] = k
    return out.astype(np.float32)
