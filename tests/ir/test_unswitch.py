"""Unswitching selects: a concat's parts leave the vector loop, each branch reads one input, the
code grows with the parts and not with their product, and no store changes (an interpreter runs
random concat schedules before and after the pass)."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import autotune
import autotune.te as te
from autotune.ir.nodes import Buffer, For, ForKind, IfThenElse, Load, Seq, Store
from autotune.ir.passes.partition import partition_loops
from autotune.ir.passes.unswitch import unswitch_selects
from autotune.te.expr import Binary, BinOp, CmpOp, Compare, Const, Select, Var
from autotune.topi import movement

from .test_partition import Interpreter, built, nodes, size

RNG = np.random.default_rng(5)


def concat_task(parts, axis=1, rest=(2, 13, 17)):
    shape = list(rest)
    shape.insert(axis, sum(parts))
    return autotune.create_task("concat", shape=tuple(shape), axis=axis, sizes=tuple(parts))


def test_a_concats_vector_loop_reads_one_input_per_branch():
    """Three parts along the channels of an odd image: no select is left, and every load reads
    whole vectors of one input (a predicate only on the row's tail lanes)."""
    task = concat_task((7, 3, 11))
    f = task.lower(task.default_index)
    assert not nodes(f.body, Select)
    for load in nodes(f.body, Load):
        assert load.predicate is None or load.lanes > 1, load


def test_a_concat_of_many_parts_grows_with_the_parts():
    """Twelve parts (a DenseNet block's concat): one branch per part, not a chain in each."""
    small, large = (f.lower(f.default_index) for f in (concat_task((5, 3, 7)), concat_task((5,) + (3,) * 11)))
    assert not nodes(large.body, Select)
    assert size(large.body) < 6 * size(small.body)


def test_every_concat_config_matches_numpy():
    """Seven parts of prime extents along each axis, every config of a sample."""
    for axis in range(3):
        parts = (3, 5, 2, 7, 1, 11, 13)
        task = concat_task(parts, axis, rest=(3, 17))
        x = task.make_inputs(RNG)
        want = np.concatenate(x, axis)
        for index in sorted({task.default_index, *RNG.integers(0, len(task.config_space), 12).tolist()}):
            if not task.is_valid(index):
                continue
            got = np.full(want.shape, np.nan, np.float32)
            autotune.build(*task.instantiate(index))(*x, got)
            np.testing.assert_array_equal(got, want, err_msg=f"axis {axis} config {index}")


def test_independent_conditions_beside_a_large_store_are_left_in_place():
    """Two selects on unrelated conditions beside a large store that reads neither, in an inner
    loop: their branches would copy the large store three times or more, so the loop is kept."""
    i, j = Var("i", "int32"), Var("j", "int32")
    a, b, c = Buffer("a", (16,), "int32"), Buffer("b", (16,), "int32"), Buffer("c", (16,), "int32")
    one, two = Const(1, "int32"), Const(2, "int32")
    first = Store(a, i, Select(Compare(CmpOp.LT, i, Const(5, "int32")), one, two))
    second = Store(c, i, Select(Compare(CmpOp.GE, i, Const(9, "int32")), one, two))
    big_value = Load(a, i)
    for k in range(12):
        big_value = Binary(BinOp.ADD, big_value, Binary(BinOp.MUL, Load(b, i), Const(k, "int32")))
    inner = For(j, 4, ForKind.SERIAL, Seq((first, second, Store(b, i, big_value))))
    loop = For(i, 16, ForKind.SERIAL, inner)
    assert unswitch_selects(loop) is loop


def test_an_invariant_condition_becomes_one_branch_per_iteration():
    """A select on the outer variable inside an inner loop: tested once per outer iteration."""
    i, j = Var("i", "int32"), Var("j", "int32")
    a, x, y = (Buffer(n, (8, 8), "int32") for n in "axy")
    at = Binary(BinOp.ADD, Binary(BinOp.MUL, i, Const(8, "int32")), j)
    value = Select(Compare(CmpOp.LT, i, Const(3, "int32")), Load(x, at), Load(y, at))
    loop = For(i, 8, ForKind.PARALLEL, For(j, 8, ForKind.SERIAL, Store(a, at, value)))
    out = unswitch_selects(loop)
    assert isinstance(out.body, IfThenElse) and not nodes(out, Select)
    memory = {"x": list(range(64)), "y": list(range(100, 164)), "a": [0] * 64}
    runs = [Interpreter(memory) for _ in range(2)]
    runs[0].run(loop)
    runs[1].run(out)
    assert runs[0].trace == runs[1].trace


def test_gpu_kernels_are_left_alone():
    """A concat whose loops are bound to blocks and threads keeps its selects: a branch on a
    thread's index would put the barriers inserted later under divergent control flow."""
    xs = [te.placeholder((5, 7), name=f"x{k}") for k in range(2)]
    y = movement.concat(xs, 0)
    s = te.create_schedule(y.op)
    i, j = s[y].op.axis
    s[y].bind(i, te.thread_axis("blockIdx.x"))
    s[y].bind(j, te.thread_axis("threadIdx.x"))
    body = partition_loops(built(s, [*xs, y]))
    assert nodes(body, Select) and unswitch_selects(body) is body


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_unswitching_keeps_every_store(data):
    """Random concats (2-5 parts along a random axis of a 3-d int32 result) under random splits,
    fusions and annotations: the same stores, in the same order, before and after."""
    axis = data.draw(st.integers(0, 2), label="axis")
    parts = data.draw(st.lists(st.integers(1, 5), min_size=2, max_size=5), label="parts")
    rest = [data.draw(st.integers(1, 6), label=f"dim {d}") for d in range(2)]
    shapes = []
    for p in parts:
        sh = list(rest)
        sh.insert(axis, p)
        shapes.append(tuple(sh))
    xs = [te.placeholder(sh, "int32", name=f"x{k}") for k, sh in enumerate(shapes)]
    y = movement.concat(xs, axis)
    s = te.create_schedule(y.op)
    axes = list(s[y].op.axis)
    if data.draw(st.booleans(), label="fuse the two outer axes?"):
        axes = [s[y].fuse(axes[0], axes[1]), axes[2]]
    factor = data.draw(st.integers(1, axes[-1].extent + 2), label="inner factor")
    _, inner = s[y].split(axes[-1], factor)
    if data.draw(st.booleans(), label="vectorize?"):
        s[y].vectorize(inner)
    if data.draw(st.booleans(), label="parallel?"):
        s[y].parallel(axes[0])
    before = partition_loops(built(s, [*xs, y]))
    after = unswitch_selects(before)
    memory = {f"x{k}": [1000 * k + v for v in range(math.prod(sh))] for k, sh in enumerate(shapes)}
    traces = []
    for body in (before, after):
        run = Interpreter({**memory, y.name: [0] * math.prod(y.shape)})
        run.run(body)
        traces.append(run.trace)
    assert traces[0] == traces[1], f"before:\n{before}\nafter:\n{after}"
