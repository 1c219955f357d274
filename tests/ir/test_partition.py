"""Loop partition: main ranges lose their tail guards, tails keep them, and nothing else changes.

The structure tests read what the pass did in `split_loops` (the pass before folding): a loop
whose body became `if hoisted: main else: tail` (versioned), or a loop next to its `.head` /
`.tail` pieces (the main range of a partition). Each main body, without the tails nested in it,
then goes through the rest of lowering (vectorize, unroll, simplify) and must hold vector code
and no branch or predicated access. The property test runs random nested-tail schedules through an interpreter
before and after the pass: the sequence of stores must be the same, value for value.
"""
from __future__ import annotations

import math
import warnings

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import autotune.te as te
from autotune.ir.functor import transform, walk
from autotune.ir.infer_bound import BoundInference
from autotune.ir.nodes import Allocate, For, ForKind, IfThenElse, Let, Load, Ramp, Seq, Store
from autotune.ir.passes.partition import MAX_COPIES, partition_loops, split_loops
from autotune.ir.passes.simplify import simplify
from autotune.ir.passes.unroll import unroll_loops
from autotune.ir.passes.vectorize import vectorize_loops
from autotune.ir.schedule_ops import NestBuilder, needed_stages, param_buffers
from autotune.schedules.task import create_task
from autotune.te.expr import And, Binary, BinOp, Cast, CmpOp, Compare, Const, Not, Or, Select, Var


def built(s, args):
    """The loop IR as the partition pass receives it (lower's first two steps)."""
    needed = needed_stages(s, ())
    params, _, _ = param_buffers(s, list(args), (), needed)
    return simplify(NestBuilder(s, BoundInference(s), params, needed).build())


def nodes(stmt, cls):
    out = []
    walk(stmt, lambda n: out.append(n) if isinstance(n, cls) else None)
    return out


TAIL = (".head", ".tail")


def main_bodies(split):
    """The main body of each outermost loop the pass acted on (in `split_loops`' output): the
    fast branch of a versioned loop, or the body of a partition's main range."""
    out = []

    def visit(s):
        if isinstance(s, Seq):
            names = {x.var.name for x in s.stmts if isinstance(x, For)}
            for x in s.stmts:
                if isinstance(x, For) and any(x.var.name + t in names for t in TAIL):
                    out.append(x.body)
                else:
                    visit(x)
        elif isinstance(s, IfThenElse) and s.else_case is not None:
            out.append(s.then_case)
        elif isinstance(s, (For, Allocate, Let)):
            visit(s.body)
        elif isinstance(s, IfThenElse):
            visit(s.then_case)

    visit(split)
    return out


def main_path(s):
    """`s` without the tails nested in it: versions keep their fast branch, head and tail
    pieces go."""
    def post(n):
        if isinstance(n, IfThenElse) and n.else_case is not None:
            return n.then_case
        if isinstance(n, For) and n.var.name.endswith(TAIL):
            return Seq(())
        return None

    return transform(s, post)


def finish(body):
    """The rest of lowering on one main body without its nested tails; a loop that fails to
    vectorize fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return simplify(unroll_loops(vectorize_loops(simplify(main_path(body)))))


def assert_clean(body):
    text = str(body)
    assert not nodes(body, IfThenElse), f"a branch is left in the main body:\n{text}"
    assert not [n for n in nodes(body, (Load, Store)) if n.predicate is not None], f"predicated access:\n{text}"
    assert nodes(body, Ramp), f"the main body lost its vector code:\n{text}"


TEMPLATES = [
    ("matmul", dict(M=37, N=41, K=43), 2),       # packing + the tiled product (parallel, versioned)
    ("matmul", dict(M=997, N=1009, K=1013), 2),
    ("dense", dict(M=37, N=41, K=43), 2),
    ("softmax", dict(M=7, N=1009), 2),           # the exp and normalize loops (serial, partitioned)
    ("relu", dict(shape=(1009,)), 1),
    ("add", dict(a_shape=(1013,), b_shape=(1013,)), 1),
]


@pytest.mark.parametrize("op,params,acted", TEMPLATES, ids=[f"{o}-{'x'.join(map(str, p.values()))}" for o, p, _ in TEMPLATES])
def test_template_main_bodies_are_guard_free_vector_code(op, params, acted):
    task = create_task(op, **params)
    s, args = task.instantiate(0)
    split = split_loops(built(s, args))
    mains = main_bodies(split)
    assert len(mains) >= acted, split
    for body in mains:
        assert_clean(finish(body))


def test_a_padded_pools_row_guards_leave_its_load_predicates_too():
    """An average pool's window sum reads the padded input through te.if_then_else, whose loads
    carry the condition as their predicate. The interior rows' version must drop the row bounds
    from those predicates as from the selects: masked loads ran the pool 4x slower. The column
    bounds are per lane of the vector loop and stay."""
    task = create_task("avg_pool2d", shape=(1, 5, 28, 28), kernel=3, stride=1, padding=1)
    s, args = task.instantiate(0)
    mains = main_bodies(split_loops(built(s, args)))
    assert mains
    for body in mains:
        done = finish(body)
        preds = [n.predicate for n in nodes(done, Load) if n.predicate is not None]
        assert not any(v.name == "ry" for p in preds for v in nodes(p, Var)), done


def tiled_matmul(M, N, K, parallel=True, cache=True):
    """A 2-D tiled matmul with every split leaving a tail, the reduction split twice, the tile
    accumulated in a local buffer computed at the (fused, parallel) tile loop."""
    A, B = te.placeholder((M, K), name="A"), te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local") if cache else C
    io, jo, ii, ji = s[C].tile(*C.op.axis, 8, 16)
    outer = s[C].fuse(io, jo) if parallel else jo
    if parallel:
        s[C].parallel(outer)
    if cache:
        s[CL].compute_at(s[C], outer)
        ci, cj = s[CL].op.axis
        s[C].vectorize(ji)
    else:
        ci, cj = ii, ji
    ko, ki = s[CL].split(s[CL].op.reduce_axis[0], 6)
    kio, kii = s[CL].split(ki, 4)
    s[CL].reorder(ko, kio, ci, kii, cj)
    s[CL].unroll(kii)
    s[CL].vectorize(cj)
    return s, [A, B, C]


@pytest.mark.parametrize("parallel", [True, False])
def test_nested_tails_of_a_tiled_matmul(parallel):
    s, args = tiled_matmul(37, 41, 43, parallel=parallel)
    split = split_loops(built(s, args))
    mains = main_bodies(split)
    assert mains
    for body in mains:
        assert_clean(finish(body))
    after = partition_loops(built(s, args))
    if parallel:                # still one parallel loop, and it is the only one
        assert [f.kind for f in nodes(after, For) if f.kind is ForKind.PARALLEL] == [ForKind.PARALLEL]


def test_a_serial_loop_splits_into_main_and_tail_in_order():
    A = te.placeholder((43,), name="A")
    B = te.compute((43,), lambda i: A[i] * 2.0, name="B")
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], 8)
    s[B].vectorize(xi)
    before = built(s, [A, B])
    after = partition_loops(before)
    main, tail = after.stmts
    assert isinstance(main, For) and main.extent == 5 and main.var is before.var and not nodes(main, IfThenElse)
    assert nodes(tail, IfThenElse) and "< 43" in str(tail)   # the last 3 elements: the only guarded code


def test_a_padding_select_splits_into_head_main_and_tail():
    A = te.placeholder((37,), name="A")
    P = te.compute((43,), lambda i: te.if_then_else(te.all(i >= 3, i < 40), A[i - 3], te.const(0.0)), name="P")
    s = te.create_schedule(P.op)
    _, xi = s[P].split(P.op.axis[0], 8)
    s[P].vectorize(xi)
    after = partition_loops(built(s, [A, P]))
    head, main, tail = after.stmts
    assert isinstance(main, For) and main.extent == 4            # vectors 1..4 (elements 8..39) read A only
    assert not nodes(main, Select) and nodes(head, Select)
    assert nodes(tail, IfThenElse) and not nodes(tail, Load)    # elements 40..42: zeros, under the tail guard
    assert_clean(finish(main))


def test_a_row_padding_select_under_a_parallel_row_loop_is_versioned_out_of_the_unrolled_columns():
    """A padded copy whose rows are the parallel loop: the row bound reads only that loop, but
    it is tested per element of the unrolled columns (a predicated load each); the main version
    of each row is plain loads and stores."""
    A = te.placeholder((5, 16), name="A")
    P = te.compute((7, 16), lambda i, j: te.if_then_else(te.all(i >= 1, i < 6), A[i - 1, j], te.const(0.0)), name="P")
    s = te.create_schedule(P.op)
    row, col = P.op.axis
    s[P].parallel(row)
    s[P].unroll(col)
    split = split_loops(built(s, [A, P]))
    (main,) = main_bodies(split)
    done = finish(main)
    assert nodes(split, Select) and not nodes(done, Select)
    assert not [n for n in nodes(done, (Load, Store)) if n.predicate is not None]


def test_gpu_kernels_are_left_alone():
    task = create_task("matmul", target="cuda -arch=sm_80", M=257, N=263, K=269)
    s, args = task.instantiate(next(i for i in range(len(task.config_space)) if task.is_valid(i)))
    before = built(s, args)
    assert partition_loops(before) is before


def size(stmt):
    return len(nodes(stmt, object))


def test_code_growth_is_capped():
    """Three split axes with tails, each under a vectorized loop: at most MAX_COPIES body copies."""
    A = te.placeholder((13, 17, 19), name="A")
    B = te.compute((13, 17, 19), lambda i, j, k: A[i, j, k] + 1.0, name="B")
    s = te.create_schedule(B.op)
    i, j, k = B.op.axis
    io, ii = s[B].split(i, 4)
    jo, ji = s[B].split(j, 4)
    ko, ki = s[B].split(k, 8)
    s[B].reorder(io, jo, ko, ii, ji, ki)
    s[B].unroll(ii)
    s[B].vectorize(ki)
    before = built(s, [A, B])
    after = partition_loops(before)
    assert size(after) <= (1 + MAX_COPIES) * size(before)
    assert main_bodies(split_loops(before))


# ---- the property: the pass changes no store ---------------------------------------------------

_OPS = {BinOp.ADD: lambda a, b: a + b, BinOp.SUB: lambda a, b: a - b, BinOp.MUL: lambda a, b: a * b,
        BinOp.FLOORDIV: lambda a, b: a // b, BinOp.FLOORMOD: lambda a, b: a % b, BinOp.MAX: max, BinOp.MIN: min}
_CMP = {CmpOp.LT: lambda a, b: a < b, CmpOp.LE: lambda a, b: a <= b, CmpOp.GT: lambda a, b: a > b,
        CmpOp.GE: lambda a, b: a >= b, CmpOp.EQ: lambda a, b: a == b, CmpOp.NE: lambda a, b: a != b}


class Interpreter:
    """Runs scalar loop IR (any loop kind as a serial loop) and records every store in order."""

    def __init__(self, memory):
        self.mem = {name: list(values) for name, values in memory.items()}
        self.env = {}
        self.trace = []

    def expr(self, e):
        t = type(e)
        if t is Var:
            return self.env[e]
        if t is Const:
            return e.value
        if t is Binary:
            return _OPS[e.op](self.expr(e.a), self.expr(e.b))
        if t is Compare:
            return _CMP[e.op](self.expr(e.a), self.expr(e.b))
        if t is And:
            return self.expr(e.a) and self.expr(e.b)
        if t is Or:
            return self.expr(e.a) or self.expr(e.b)
        if t is Not:
            return not self.expr(e.a)
        if t is Select:
            return self.expr(e.t) if self.expr(e.cond) else self.expr(e.f)
        if t is Cast:
            return self.expr(e.value)
        if t is Load:
            if e.predicate is not None and not self.expr(e.predicate):
                return 0
            return self.read(e.buffer, self.expr(e.index))
        raise AssertionError(f"cannot interpret {t.__name__}")

    def read(self, buf, i):
        assert 0 <= i < buf.size, f"{buf.name}[{i}] is out of bounds"
        return self.mem[buf.name][i]

    def run(self, s):
        t = type(s)
        if t is For:
            for i in range(s.extent):
                self.env[s.var] = i
                self.run(s.body)
        elif t is Seq:
            for x in s.stmts:
                self.run(x)
        elif t is IfThenElse:
            branch = s.then_case if self.expr(s.cond) else s.else_case
            if branch is not None:
                self.run(branch)
        elif t is Allocate:
            self.mem[s.buffer.name] = [0] * s.buffer.size
            self.run(s.body)
        elif t is Let:
            self.env[s.var] = self.expr(s.value)
            self.run(s.body)
        elif t is Store:
            if s.predicate is None or self.expr(s.predicate):
                i, v = self.expr(s.index), self.expr(s.value)
                assert 0 <= i < s.buffer.size, f"{s.buffer.name}[{i}] is out of bounds"
                self.mem[s.buffer.name][i] = v
                self.trace.append((s.buffer.name, i, v))
        else:
            raise AssertionError(f"cannot interpret {t.__name__}")


def _split_randomly(data, stage, ax, label):
    """ax split 0, 1 or 2 times (the inner part again), factors up to extent + 2: its leaves."""
    leaves = [ax]
    for depth in range(data.draw(st.integers(0, 2), label=f"{label}: splits")):
        f = data.draw(st.integers(1, leaves[-1].extent + 2), label=f"{label}: factor {depth}")
        leaves[-1:] = stage.split(leaves[-1], f)
    return leaves


def draw_program(data):
    """C = A @ B on int32 (exact), random nested tail splits, annotations and a cache stage;
    or a padded 1-D stencil whose select has a head and a tail."""
    if data.draw(st.booleans(), label="stencil?"):
        n, pad = data.draw(st.sampled_from((11, 17, 23)), label="n"), data.draw(st.integers(1, 4), label="pad")
        A = te.placeholder((n,), "int32", name="A")
        P = te.compute((n + 2 * pad,), lambda i: te.if_then_else(te.all(i >= pad, i < n + pad), A[i - pad],
                                                                  te.const(0, "int32")), name="P")
        s = te.create_schedule(P.op)
        leaves = _split_randomly(data, s[P], P.op.axis[0], "P.i")
        annotate(data, s[P], leaves, [])
        return s, [A, P], {"A": list(range(3, 3 + n))}
    M, N, K = (data.draw(st.sampled_from(v), label=l) for v, l in (((5, 7, 13), "M"), ((3, 11, 17), "N"), ((7, 9), "K")))
    A, B = te.placeholder((M, K), "int32", name="A"), te.placeholder((K, N), "int32", name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CL = s.cache_write(C, "local") if data.draw(st.booleans(), label="cache_write?") else C
    i_leaves = _split_randomly(data, s[C], C.op.axis[0], "C.i")
    j_leaves = _split_randomly(data, s[C], C.op.axis[1], "C.j")
    outer = i_leaves[:1] + j_leaves[:1]
    s[C].reorder(*outer, *i_leaves[1:], *j_leaves[1:])
    if data.draw(st.booleans(), label="fuse the outer loops?"):    # tails under a fused loop: i // n, i % n
        outer = [s[C].fuse(*outer)]
    if CL is not C:
        s[CL].compute_at(s[C], outer[-1])
    ci, cj = s[CL].op.axis
    k_leaves = _split_randomly(data, s[CL], s[CL].op.reduce_axis[0], "k")
    if CL is C:
        annotate(data, s[C], i_leaves[1:] + j_leaves[1:], outer)
    else:
        s[CL].reorder(*k_leaves, ci, cj)
        annotate(data, s[CL], [ci, cj] + k_leaves[1:], [])
        annotate(data, s[C], i_leaves[1:] + j_leaves[1:], outer)
    a = [(3 * x) % 11 - 5 for x in range(M * K)]
    b = [(7 * x) % 13 - 6 for x in range(K * N)]
    return s, [A, B, C], {"A": a, "B": b}


def annotate(data, stage, inner, outer):
    """Vectorize the innermost data leaf, unroll another short leaf, parallel an outer one: each
    maybe (the interpreter runs them all as serial loops; the pass must treat them right)."""
    data_leaves = [iv for iv in inner if iv.kind == "data"]
    if data_leaves and data.draw(st.integers(0, 3), label=f"{stage.name}: vectorize? (0: no)"):
        stage.vectorize(data_leaves[-1])
    short = [iv for iv in inner[:-1] if iv.extent <= 8]
    if short and data.draw(st.booleans(), label=f"{stage.name}: unroll?"):
        stage.unroll(short[data.draw(st.integers(0, len(short) - 1), label=f"{stage.name}: unroll which")])
    if outer and data.draw(st.booleans(), label=f"{stage.name}: parallel?"):
        stage.parallel(outer[0])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_partition_keeps_every_store(data):
    s, args, inputs = draw_program(data)
    before = built(s, args)
    after = partition_loops(before)
    event("partitioned" if split_loops(before) is not before else "unchanged")
    runs = []
    for body in (before, after):
        run = Interpreter({**inputs, **{t.name: [0] * math.prod(t.shape) for t in args[len(inputs):]}})
        run.run(body)
        runs.append(run.trace)
    assert runs[0] == runs[1], f"before:\n{before}\nafter:\n{after}"
