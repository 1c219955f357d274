"""Fixed-length feature vectors of lowered loop IR: the cost model's only view of a candidate.

`extract(func, knobs, cpu)` returns `FEATURE_LEN` float32 values; `feature_names()` names them.
The length never depends on the program (AutoTVM's variable-length rows break its model when loop
nests differ), so rows of any workload stack into one matrix. Magnitudes are log-scaled,
`lg(x) = log2(1 + x)`; flags are 0/1; absent slots are 0. Besides the IR, only two numbers of the
target are read, from `cpu` (`autotune.target.CpuFacts`; None for GPU code and then the features
that need them are 0): the vector register's bytes and the cores.

How the IR is read
------------------
* Every Store runs `prod(extents of enclosing loops)` times the share of those iterations that
  reach it through its guards (estimated on sample points of the loop nest: branches.py), so a
  versioned nest's scalar tail copy counts for the few iterations it runs.
* A *source statement* is a stored buffer with the set of buffers its value loads; its templates
  (main body, partitioned or versioned tail copies, vector and scalar paths) are its copies. The
  template that stores the most elements is the main one, the others are *tails*.
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
| tail_frac                              | share of stored elements written by tails (not  |
|                                        |   the main template of their source statement)  |
| guard_density                          | inner guard and predicate evaluations per store |
|                                        |   executed (what tails cost the main body)      |
| divmod_ops                             | lg(integer divisions and modulos executed)      |
| lane_ratio                             | log2(hot store's lanes / target lanes), signed: |
|                                        |   < 0 part of a register, > 0 several registers |
| lane_fill                              | stored elements / register lanes they occupy    |
|                                        |   (ceil(lanes / target lanes) registers each):  |
|                                        |   1 = whole registers, 1/lanes = scalar code    |
| unaligned_frac                         | share of vector elements accessed at an index   |
|                                        |   not a multiple of min(lanes, target lanes)    |
| local_regs                             | lg(local buffer bytes / vector register bytes)  |
| parallel_balance                       | hot parallel extent / (cores * rounds): 1 when  |
|                                        |   every core gets as many iterations            |
| n_gathers, gather_elems                | lg(gather/scatter accesses), lg(their elements) |
| prefetches                             | lg(cache lines fetched ahead: Prefetch          |
|                                        |   statements executed)                          |
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
from typing import Any

import numpy as np

from ..dtype import dtype_info
from ..ir.nodes import Allocate, Let, PrimFunc, Seq
from ..target import CpuFacts
from .hot_nest import BufStats, Level, hot_buffers, hot_levels
from .ir_walk import ANALYZE, PARALLEL_KINDS, Path, Template, Walk, visit

MAX_LOOPS = 8
MAX_BUFFERS = 5
MAX_KNOBS = 16

_KINDS = ("serial", "parallel", "unrolled", "vectorized", "thread")
_LOOP_FIELDS = ("extent", *(f"is_{k}" for k in _KINDS), "depth", "prod_above", "prod_below",
                "working_set")
_BUF_FIELDS = ("bytes", "footprint", "stride", "is_vector", "lanes", "is_store", "is_local",
               "is_gather", *(f"reuse{i}" for i in range(MAX_LOOPS)),
               *(f"touch{i}" for i in range(MAX_LOOPS)))
_FUNC_FIELDS = ("flops", "int_ops", "global_bytes", "intensity", "intensity_compulsory",
                "n_parallel", "parallel_extent", "parallel_frac", "vector_frac", "vector_lanes",
                "n_local_alloc", "local_bytes", "n_other_alloc", "other_bytes", "n_guards",
                "inner_guards", "inner_guard_evals", "hot_guards", "else_frac", "n_gathers",
                "gather_elems", "n_stores", "n_loops", "n_nests", "hot_depth", "unroll", "hot_frac",
                "tail_frac", "guard_density", "divmod_ops", "lane_ratio", "lane_fill",
                "unaligned_frac", "local_regs", "parallel_balance", "prefetches")

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


# ---- assembling the vector ---------------------------------------------------------------------

def _fill_levels(out: np.ndarray, levels: list[Level], bufs: list[BufStats]) -> None:
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
    divmods: float = 0.0
    global_bytes: float = 0.0
    parallel_flops: float = 0.0
    vector_flops: float = 0.0
    else_flops: float = 0.0
    hot_flops: float = 0.0
    gathers: float = 0.0
    gather_elems: float = 0.0
    compulsory: float = 0.0     # bytes of the distinct global buffers accessed
    stores: float = 0.0         # store statements executed
    elems: float = 0.0          # elements stored
    reg_lanes: float = 0.0      # register lanes those stores occupy (0 without a target)
    vector_elems: float = 0.0   # elements of vector accesses
    unaligned: float = 0.0      # of those, at an index not a multiple of the target lanes


def _lanes_of(cpu: CpuFacts | None, dtype: str, fallback: int) -> int:
    return cpu.lanes(dtype_info(dtype).bytes) if cpu is not None else fallback


def _aligned(aff, lanes: int) -> bool:
    """Whether every value of the index is a multiple of `lanes` (no vector straddles a register
    boundary: one a register wide or wider starts on one, a narrower one stays within one)."""
    return aff.const % lanes == 0 and all(c % lanes == 0 for c in aff.coef.values())


def _add_template(t: _Totals, tpl: Template, hot: Template | None, cpu: CpuFacts | None) -> None:
    analysed = min(tpl.copies, ANALYZE)
    scale = tpl.runs / analysed           # per analysed copy -> all copies and their runs
    f = tpl.flops * scale
    t.flops, t.int_ops, t.divmods = t.flops + f, t.int_ops + tpl.int_ops * scale, t.divmods + tpl.divmods * scale
    t.parallel_flops += f if any(lp.kind in PARALLEL_KINDS for lp in tpl.loops) else 0.0
    t.vector_flops += f if tpl.lanes > 1 else 0.0
    t.else_flops += f if tpl.in_else else 0.0
    t.hot_flops += f if tpl is hot else 0.0
    t.stores += tpl.runs
    t.elems += tpl.runs * tpl.lanes
    for acc in tpl.accesses:
        for a in acc:
            if a.is_store and cpu is not None:
                regs = _lanes_of(cpu, a.buffer.dtype, 1)
                t.reg_lanes += -(-a.lanes // regs) * regs * scale
            if a.lanes > 1:
                t.vector_elems += a.lanes * scale
                if not _aligned(a.aff, min(a.lanes, _lanes_of(cpu, a.buffer.dtype, a.lanes))):
                    t.unaligned += a.lanes * scale
            if a.buffer.scope == "global":
                t.global_bytes += a.lanes * dtype_info(a.buffer.dtype).bytes * scale
            if a.gather:
                t.gathers += tpl.copies / analysed
                t.gather_elems += a.lanes * scale


def _totals(w: Walk, hot: Template | None, cpu: CpuFacts | None) -> _Totals:
    """Whole-run sums over all templates (analysed copies scaled to all copies and their runs)."""
    t, global_bufs = _Totals(), dict[int, Any]()
    for tpl in w.templates.values():
        _add_template(t, tpl, hot, cpu)
        global_bufs.update((id(a.buffer), a.buffer) for acc in tpl.accesses for a in acc
                           if a.buffer.scope == "global")
    t.compulsory = sum(b.size * dtype_info(b.dtype).bytes for b in global_bufs.values())
    return t


def _tail_elems(w: Walk) -> float:
    """Elements stored by tails: templates of a source statement other than its main one."""
    by_stmt: dict = {}
    for tpl in w.templates.values():
        by_stmt.setdefault(tpl.stmt, []).append(tpl.runs * tpl.lanes)
    return sum(sum(elems) - max(elems) for elems in by_stmt.values())


def _balance(extents: list[int], cpu: CpuFacts | None) -> float:
    """Iterations / (cores * rounds of the slowest core) of a parallel loop nest."""
    if not extents or cpu is None:
        return 0.0
    n = math.prod(extents)
    return n / (-(-n // cpu.cores) * cpu.cores)


def _target_features(w: Walk, t: _Totals, hot: Template | None, cpu: CpuFacts | None) -> dict:
    """The features that relate the IR to the target's vector width and cores (module table)."""
    out = {"lane_ratio": 0.0, "lane_fill": 0.0, "local_regs": 0.0,
           "unaligned_frac": t.unaligned / t.vector_elems if t.vector_elems else 0.0}
    if cpu is None:
        return out
    if hot is not None:
        store = next(a for a in hot.accesses[0] if a.is_store)
        out["lane_ratio"] = math.log2(hot.lanes / _lanes_of(cpu, store.buffer.dtype, 1))
    out["lane_fill"] = t.elems / t.reg_lanes if t.reg_lanes else 0.0
    out["local_regs"] = lg(sum(b for scope, b in w.allocs if scope == "local") / cpu.vector_bytes)
    return out


def _func_features(func: PrimFunc, w: Walk, hot: Template | None, cpu: CpuFacts | None) -> list[float]:
    t = _totals(w, hot, cpu)
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
        "tail_frac": _tail_elems(w) / t.elems if t.elems else 0.0,
        "guard_density": w.inner_guard_evals / t.stores if t.stores else 0.0,
        "divmod_ops": lg(t.divmods), "parallel_balance": _balance(hot_par, cpu),
        "prefetches": lg(w.prefetches),
        **_target_features(w, t, hot, cpu),
    }
    return [row[name] for name in _FUNC_FIELDS]


def _hottest(w: Walk) -> Template | None:
    best, best_work = None, -1.0
    for tpl in w.templates.values():
        analysed = min(tpl.copies, ANALYZE)
        work = tpl.runs * (tpl.lanes + tpl.flops / analysed)
        if work > best_work:
            best, best_work = tpl, work
    return best


def extract(func: PrimFunc, knobs: Sequence[float] = (), cpu: CpuFacts | None = None) -> np.ndarray:
    """The `FEATURE_LEN` float32 features of a lowered function (see the module table); `cpu`
    gives the target's vector width and cores (None: the features relative to them are 0)."""
    w = Walk()
    visit(func.body, Path(), w)
    out = np.zeros(FEATURE_LEN, dtype=np.float64)
    hot = _hottest(w)
    if hot is not None:
        levels = hot_levels(hot)
        _fill_levels(out, levels, hot_buffers(hot, levels))
    out[_FUNC_AT:_KNOB_AT] = _func_features(func, w, hot, cpu)
    return with_knobs(out.astype(np.float32), knobs)


def with_knobs(features: np.ndarray, knobs: Sequence[float]) -> np.ndarray:
    """The features with their knob part set to `knobs` (the first MAX_KNOBS, the rest 0): a
    record of another shape, re-expressed in the knob layout of the task it trains for."""
    out = features.copy()
    k = np.asarray(list(knobs)[:MAX_KNOBS], dtype=np.float32)
    out[_KNOB_AT:_KNOB_AT + MAX_KNOBS] = 0
    out[_KNOB_AT:_KNOB_AT + len(k)] = k
    return out
