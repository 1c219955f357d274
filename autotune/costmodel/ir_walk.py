"""Walking the loop IR for the cost model: every store with its loop nest, execution count and
accesses (affine index forms), grouped into templates of unrolled copies. Guards split the count
between their branches by how often each is taken (branches.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..dtype import dtype_info
from ..ir.nodes import Allocate, Broadcast, For, ForKind, IfThenElse, Let, Load, Prefetch, Ramp, Seq, Store
from ..te.expr import And, Binary, BinOp, Call, Cast, Compare, Const, Not, Or, Select, Var
from .branches import Branches, Mask

ANALYZE = 32  # copies analysed per template (exact up to 32 unrolled copies); the rest are counted
PARALLEL_KINDS = (ForKind.PARALLEL, ForKind.THREAD_BOUND)
_DIVMOD = (BinOp.FLOORDIV, BinOp.FLOORMOD)


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
    if type(e) is Const:
        return _Aff({}, float(e.value))
    if type(e) is Var:
        return _Aff({e: 1.0})
    if type(e) is Ramp:
        base, step = _aff(e.base, memo), _aff(e.stride, memo)
        return _Aff(base.coef, base.const, step.const, e.lanes, base.data_dependent)
    if type(e) is Broadcast:
        v = _aff(e.value, memo)
        return _Aff(v.coef, v.const, 0.0, e.lanes, v.data_dependent)
    if type(e) is Cast:
        return _aff(e.value, memo)
    if type(e) is Load:
        inner = _aff(e.index, memo)
        return _Aff({v: 1.0 for v in inner.coef}, 0.0, 0.0, inner.lanes, True)
    if type(e) is Binary:
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
    if type(e) is Select:
        return _aff(e.t, memo)
    return _Aff({})


def _is_gather(index, lanes: int, aff: _Aff) -> bool:
    """Per-lane addressing in the codegen: not a splat and not a unit-stride Ramp."""
    if aff.data_dependent:
        return True
    if lanes == 1 or type(index) is Broadcast:
        return False
    return not (type(index) is Ramp and type(index.stride) is Const and index.stride.value == 1)


_FLOAT_KIND: dict[str, bool] = {}


def _is_float(dtype: str) -> bool:
    r = _FLOAT_KIND.get(dtype)
    if r is None:
        r = _FLOAT_KIND[dtype] = dtype_info(dtype).kind == "float"
    return r


def _ops(e, memo: dict) -> tuple[float, float, float, tuple, int]:
    """(float ops, integer ops, integer divisions/modulos, loads, lanes) of one evaluation of
    `e`; shared subtrees memoised."""
    r = memo.get(id(e))
    if r is not None:
        return r
    t = type(e)
    if type(e) is Load:
        f, i, d, loads, lanes = _ops(e.index, memo)
        r = (f, i, d, loads + (e,), lanes)
    elif t is Binary or t is Compare or t is Call or t is Select or t is Cast or t is Ramp \
            or t is Broadcast or t is Not or t is And or t is Or:
        f = i = d = 0.0
        loads = ()
        lanes = 1
        for c in _expr_children(e, t):
            cf, ci, cd, cl, cn = _ops(c, memo)
            f, i, d, loads, lanes = f + cf, i + ci, d + cd, loads + cl, max(lanes, cn)
        if t is Ramp or t is Broadcast:
            lanes = e.lanes_
        elif t is Binary or t is Call or t is Compare:
            if _is_float(e.a.dtype if t is Compare else e.dtype):
                f += lanes
            else:
                i += lanes
                d += lanes if t is Binary and e.op in _DIVMOD else 0
        r = (f, i, d, loads, lanes)
    else:   # Var, Const
        r = (0.0, 0.0, 0.0, (), 1)
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
class Access:
    buffer: object
    aff: _Aff
    lanes: int
    is_store: bool
    gather: bool
    levels: tuple   # loop vars of the copy, outermost first (maps coef to levels)


@dataclass(slots=True)
class Template:
    loops: tuple           # For nodes of the first copy, outermost first
    lanes: int
    guards: int            # deepest guard nesting seen over the copies
    in_else: bool
    stmt: tuple = ()       # (stored buffer, loaded buffers): copies of one source statement
    copies: int = 0
    runs: float = 0.0      # executions summed over all copies (branch shares applied)
    flops: float = 0.0     # summed over analysed copies
    int_ops: float = 0.0
    divmods: float = 0.0   # integer divisions and modulos, summed over analysed copies
    accesses: list = field(default_factory=list)   # per analysed copy: list[Access]


@dataclass(slots=True)
class Walk:
    templates: dict = field(default_factory=dict)
    memo_ops: dict = field(default_factory=dict)
    memo_aff: dict = field(default_factory=dict)
    branches: Branches = field(default_factory=Branches)
    n_loops: int = 0
    n_parallel: int = 0
    n_guards: int = 0
    inner_guards: int = 0
    inner_guard_evals: float = 0.0
    prefetches: float = 0.0        # Prefetch statements executed (cache lines fetched ahead)
    allocs: list = field(default_factory=list)   # (scope, bytes)


@dataclass(frozen=True, slots=True)
class Path:
    """Where a statement sits: its loops, how often it runs and under which guards."""

    loops: tuple = ()          # enclosing For nodes, outermost first
    sig: tuple = ()            # their (extent, kind): copies made by unrolling share it
    count: float = 1.0         # product of the enclosing extents
    guards: int = 0
    in_else: bool = False
    mask: Mask | None = None   # sample points that reach here (branches.py); None: all
    share: float = 1.0         # the mask's fraction: runs = count * share

    def into(self, loop: For) -> Path:
        return Path(self.loops + (loop,), self.sig + ((loop.extent, loop.kind),),
                    self.count * loop.extent, self.guards, self.in_else, self.mask, self.share)

    def branch(self, mask: Mask, is_else: bool) -> Path:
        return Path(self.loops, self.sig, self.count, self.guards + 1, self.in_else or is_else,
                    mask, float(mask.mean()))


def visit(s, p: Path, w: Walk) -> bool:
    """Record the stores under `s`; returns whether `s` contains a loop."""
    if type(s) is For:
        w.n_loops += 1
        w.n_parallel += s.kind in PARALLEL_KINDS
        w.branches.extent[s.var] = s.extent
        visit(s.body, p.into(s), w)
        return True
    if type(s) is Seq:
        has = False
        for x in s.stmts:
            has = visit(x, p, w) or has
        return has
    if type(s) is IfThenElse:
        w.n_guards += 1
        then, other = w.branches.split(s.cond, p.mask)
        has = visit(s.then_case, p.branch(then, False), w)
        if s.else_case is not None:
            has = visit(s.else_case, p.branch(other, True), w) or has
        if not has and p.loops:
            w.inner_guards += 1
            w.inner_guard_evals += p.count * p.share
        return has
    if type(s) is Allocate:
        b = s.buffer
        w.allocs.append((b.scope, b.size * dtype_info(b.dtype).bytes))
        return visit(s.body, p, w)
    if type(s) is Let:
        w.branches.lets[s.var] = s.value
        return visit(s.body, p, w)
    if type(s) is Store:
        _record_store(s, p, w)
    elif type(s) is Prefetch:
        w.prefetches += p.count * p.share
    return False


def _record_store(s: Store, p: Path, w: Walk) -> None:
    key = (id(s.buffer), p.sig, p.in_else)
    tpl = w.templates.get(key)
    if tpl is None:
        tpl = w.templates[key] = Template(p.loops, 1, p.guards, p.in_else)
    tpl.copies += 1
    tpl.runs += p.count * p.share
    tpl.guards = max(tpl.guards, p.guards)
    if s.predicate is not None and p.loops:
        w.inner_guard_evals += p.count * p.share
    if tpl.copies > ANALYZE:
        return
    f, i, d, loads, _ = _ops(s.value, w.memo_ops)
    fi, ii, di, iloads, lanes = _ops(s.index, w.memo_ops)
    tpl.flops += f + fi
    tpl.int_ops += i + ii
    tpl.divmods += d + di
    tpl.lanes = max(tpl.lanes, lanes)
    if not tpl.stmt:
        tpl.stmt = (id(s.buffer), frozenset(id(ld.buffer) for ld in loads))
    levels = tuple(lp.var for lp in p.loops)
    acc = []
    for node, is_store in [(ld, False) for ld in loads + iloads] + [(s, True)]:
        aff = _aff(node.index, w.memo_aff)
        acc.append(Access(node.buffer, aff, aff.lanes, is_store,
                           _is_gather(node.index, aff.lanes, aff), levels))
    tpl.accesses.append(acc)
