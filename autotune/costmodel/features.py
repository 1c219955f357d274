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
  `ANALYZE` copies are analysed and the rest only counted, which keeps extraction fast on
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
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from ..dtype import dtype_info
from ..ir.nodes import Allocate, ForKind, Let, PrimFunc, Seq
from .ir_walk import ANALYZE, PARALLEL_KINDS, Template, Walk, visit

MAX_LOOPS = 8
MAX_BUFFERS = 5
MAX_KNOBS = 16

_KINDS = ("serial", "parallel", "unrolled", "vectorized", "thread")
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


# ---- the hot nest: levels and per-buffer access features --------------------------------------

@dataclass(slots=True)
class _Level:
    extent: int
    kind: str
    depth: int | None   # position among the real loops; None for the virtual levels


def _hot_levels(tpl: Template) -> list[_Level]:
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


def _buffer_stats(buf, accs: list, tpl: Template, levels: list[_Level]) -> _BufStats:
    """Strides, reuse and footprint of one buffer's accesses in the hot template."""
    analysed = min(tpl.copies, ANALYZE)
    elem = dtype_info(buf.dtype).bytes
    coef = _coef_by_depth(accs)
    lanes = max(a.lanes for a, _ in accs)
    lane_stride = max((abs(a.aff.lane_stride) for a, _ in accs if a.lanes > 1), default=0.0)
    d, span_u, consts = _distinct_offsets(accs, analysed, tpl.copies)
    factors: list[float] = []
    spans: list[float] = []
    reuse: list[float] = []
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
        stride = min((b - a for a, b in pairwise(consts)), default=0.0)
    elif levels:
        depth = levels[-1].depth
        stride = 0.0 if depth is None else coef.get(depth, 0.0)   # coef has no None key
    else:
        stride = 0.0
    scale = tpl.copies / analysed
    moved = sum(a.lanes for a, _ in accs) * elem * tpl.count * scale
    return _BufStats(buf.name, moved, stride, lanes, any(a.is_store for a, _ in accs),
                     buf.scope == "local", any(a.gather for a, _ in accs), reuse, touch)


def _hot_buffers(tpl: Template, levels: list[_Level]) -> list[_BufStats]:
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


def _totals(w: Walk, hot: Template | None) -> _Totals:
    """Whole-run sums over all templates (analysed copies scaled to all copies)."""
    t, global_bufs = _Totals(), {}
    for tpl in w.templates.values():
        analysed = min(tpl.copies, ANALYZE)
        scale = tpl.copies / analysed * tpl.count
        f = tpl.flops * scale
        t.flops, t.int_ops = t.flops + f, t.int_ops + tpl.int_ops * scale
        t.parallel_flops += f if any(lp.kind in PARALLEL_KINDS for lp in tpl.loops) else 0.0
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


def _func_features(func: PrimFunc, w: Walk, hot: Template | None) -> list[float]:
    t = _totals(w, hot)
    share = (lambda x: x / t.flops) if t.flops > 0 else (lambda x: 0.0)
    hot_par = [lp.extent for lp in hot.loops if lp.kind in PARALLEL_KINDS] if hot else []
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


def _hottest(w: Walk) -> Template | None:
    best, best_work = None, -1.0
    for tpl in w.templates.values():
        analysed = min(tpl.copies, ANALYZE)
        work = tpl.count * tpl.copies * (tpl.lanes + tpl.flops / analysed)
        if work > best_work:
            best, best_work = tpl, work
    return best


def extract(func: PrimFunc, knobs: Sequence[float] = ()) -> np.ndarray:
    """The `FEATURE_LEN` float32 features of a lowered function (see the module table)."""
    w = Walk()
    visit(func.body, (), (), 1.0, 0, False, w)
    out = np.zeros(FEATURE_LEN, dtype=np.float64)
    hot = _hottest(w)
    if hot is not None:
        levels = _hot_levels(hot)
        _fill_levels(out, levels, _hot_buffers(hot, levels))
    out[_FUNC_AT:_KNOB_AT] = _func_features(func, w, hot)
    k = np.asarray(list(knobs)[:MAX_KNOBS], dtype=np.float64)
    out[_KNOB_AT:_KNOB_AT + len(k)] = k
    return out.astype(np.float32)
