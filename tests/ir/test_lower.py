"""Lowering: loop structure, tail guards, bound inference for compute_at, verifier errors."""
import numpy as np
import pytest

import autotune
import autotune.te as te
from autotune.errors import ScheduleError
from autotune.ir.nodes import For, ForKind, IfThenElse, Store
from autotune.ir.functor import walk


def _nodes(func, cls):
    out = []
    walk(func.body, lambda n: out.append(n) if isinstance(n, cls) else None)
    return out


def _vadd(n=10):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    return A, B


def test_tail_split_produces_a_guard_and_divisible_split_none():
    A, B = _vadd(10)
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], 4)
    ifs = _nodes(autotune.lower(s, [A, B]), IfThenElse)
    assert len(ifs) == 1 and "< 10" in str(ifs[0].cond)
    A, B = _vadd(12)
    s = te.create_schedule(B.op)
    s[B].split(B.op.axis[0], 4)
    assert not _nodes(autotune.lower(s, [A, B]), IfThenElse)


def test_printed_ir_reads_as_nested_loops():
    A, B = _vadd(12)
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], 4)
    s[B].parallel(xo)
    text = str(autotune.lower(s, [A, B], name="vadd"))
    assert text.splitlines()[0] == "def vadd(A: float32[12], B: float32[12]):"
    assert "parallel i.outer in range(3):" in text and "for i.inner in range(4):" in text


def test_compute_at_infers_the_region_of_the_attach_loop():
    A = te.placeholder((20, 30), name="A")
    B = te.compute((20, 30), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((20, 28), lambda i, j: B[i, j] + B[i, j + 2], name="C")
    s = te.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], 7)
    s[B].compute_at(s[C], jo)
    text = str(autotune.lower(s, [A, C]))
    assert "allocate B[float32 x 9] in local" in text     # 7 columns + a halo of 2


def test_compute_at_a_fused_and_split_axis_takes_the_tile_not_whole_rows():
    """C reads B at the flat index y*7 + x; attached in a tile of 16 of the fused (y, x), B's
    region is those 16 elements: y and x bounded each on its own would give 3 rows of 7 and more."""
    A = te.placeholder((5, 49), name="A")
    B = te.compute((5, 64), lambda c, p: A[c, te.minimum(p, 48)] * 2.0, name="B")
    C = te.compute((5, 7, 7), lambda c, y, x: B[c, y * 7 + x], name="C")
    s = te.create_schedule(C.op)
    _, y, x = C.op.axis
    po, _ = s[C].split(s[C].fuse(y, x), 16)
    s[B].compute_at(s[C], po)
    assert "allocate B[float32 x 16] in local" in str(autotune.lower(s, [A, C]))


def test_compute_at_over_a_split_with_a_tail_takes_the_axis_not_the_split():
    """Both halves of j's split by 4 inside the attach loop: B's region is j's 13 columns (the
    tail's guard skips the rest), not the 16 of 4 x 4; a split again (the grouped conv's
    channels in groups, then blocks) takes its parent's extent too."""
    A = te.placeholder((6, 13), name="A")
    B = te.compute((6, 13), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((6, 13), lambda i, j: B[i, j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[1], 4)
    s[B].compute_at(s[C], C.op.axis[0])
    assert "allocate B[float32 x 13] in local" in str(autotune.lower(s, [A, C]))
    D = te.compute((6, 39), lambda i, j: A[i, j % 13] * 2.0, name="D")
    E = te.compute((6, 39), lambda i, f: D[i, (f // 13) * 13 + f % 13] + 1.0, name="E")
    s = te.create_schedule(E.op)
    g, r = s[E].split(E.op.axis[1], 13)
    s[E].split(r, 4)
    s[D].compute_at(s[E], g)
    func = autotune.lower(s, [A, E])
    assert "allocate D[float32 x 13] in local" in str(func)
    out = np.empty((6, 39), "float32")
    a = np.random.default_rng(0).standard_normal((6, 13)).astype("float32")
    autotune.build(s, [A, E])(a, out)
    np.testing.assert_allclose(out, np.tile(a * 2.0 + 1.0, 3), rtol=1e-6)


def test_vectorized_tail_is_versioned_not_scalarized():
    A, B = _vadd(10)
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], 4)
    s[B].vectorize(xi)
    func = autotune.lower(s, [A, B])
    text = str(func)
    assert "ramp(" in text                                  # the full chunks run as vectors
    assert not [f for f in _nodes(func, For) if f.kind is ForKind.VECTORIZED]


def _tail_loop(n: int, factor: int, body=None):
    """B = body(A, i) over n elements, split by `factor` (a tail when it does not divide), vectorized."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), (lambda i: body(A, i)) if body else (lambda i: A[i] * 2.0 + 1.0), name="B")
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], factor)
    s[B].vectorize(xi)
    return s, [A, B]


def _scalar_loops(func):
    return [f for f in _nodes(func, For) if f.extent > 1 and f.kind is ForKind.SERIAL and "inner" in f.var.name]


@pytest.mark.parametrize("n, factor", [(37, 16), (13, 8), (67, 4)])
def test_a_vector_tail_is_one_masked_vector_pass(n, factor):
    s, args = _tail_loop(n, factor)
    func = autotune.lower(s, args)
    assert not _scalar_loops(func)
    masked = [st for st in _nodes(func, Store) if st.predicate is not None and st.index.lanes == factor]
    assert masked, func
    a = np.random.default_rng(n).standard_normal(n).astype("float32")
    b = np.full(n, np.nan, "float32")
    autotune.build(s, args)(a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def test_a_masked_tail_masks_only_what_its_guard_guarded():
    """Y is written in every lane, Z only under the tail guard: only Z's store takes the mask."""
    from autotune.ir.nodes import Buffer, Seq
    from autotune.ir.passes.vectorize import vectorize_loop
    from autotune.te.expr import Var, const

    o, v = Var("o"), Var("v")
    y, z = Buffer("Y", (32,), "float32"), Buffer("Z", (32,), "float32")
    i = o * 16 + v
    body = Seq((Store(y, i, const(1.0, "float32")), IfThenElse(i < 20, Store(z, i, const(2.0, "float32")))))
    out = vectorize_loop(For(v, 16, ForKind.VECTORIZED, body))
    assert isinstance(out, IfThenElse)
    tail = {st.buffer.name: st for st in _stores(out.else_case)}
    assert tail["Y"].predicate is None and tail["Z"].predicate is not None
    assert tail["Y"].index.lanes == tail["Z"].index.lanes == 16


def _stores(stmt):
    out = []
    walk(stmt, lambda n: out.append(n) if isinstance(n, Store) else None)
    return out


def test_a_tail_wider_than_a_register_stays_scalar():
    """64 float lanes span four AVX-512 registers: a masked pass would cost four full ones."""
    func = autotune.lower(*_tail_loop(100, 64))
    assert _scalar_loops(func)


def test_a_tail_with_an_integer_division_by_a_variable_stays_scalar():
    """i // (j - 9) divides by zero at j = 9, a lane only the guard excludes (n = 9)."""
    A = te.placeholder((9, 9), "int32", name="A")
    B = te.compute((9, 9), lambda i, j: A[i, j] + i // (j - 9), name="B")
    s = te.create_schedule(B.op)
    _, ji = s[B].split(B.op.axis[1], 4)
    s[B].vectorize(ji)
    assert _scalar_loops(autotune.lower(s, [A, B]))


def test_a_tail_dividing_its_lanes_by_a_constant_is_masked():
    """(56 v - 28) // 112 divides every lane by one nonzero constant (a 2x resize's source
    column): no lane can divide by zero, so the tail is a masked pass, not a scalar loop."""
    A = te.placeholder((30,), name="A")
    B = te.compute((58,), lambda i: A[(i * 56 - 28) // 112 + 1], name="B")
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], 16)
    s[B].vectorize(xi)
    func = autotune.lower(s, [A, B])
    assert not _scalar_loops(func)
    a = np.random.default_rng(7).standard_normal(30).astype("float32")
    b = np.full(58, np.nan, "float32")
    autotune.build(s, [A, B])(a, b)
    np.testing.assert_array_equal(b, a[(np.arange(58) * 56 - 28) // 112 + 1])


def test_unroll_copies_the_body():
    A, B = _vadd(12)
    s = te.create_schedule(B.op)
    _, xi = s[B].split(B.op.axis[0], 3)
    s[B].unroll(xi)
    func = autotune.lower(s, [A, B])
    assert [f.extent for f in _nodes(func, For)] == [4]


def test_nested_parallel_is_rejected():
    A = te.placeholder((6, 6), name="A")
    B = te.compute((6, 6), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    s[B].parallel(B.op.axis[1])
    with pytest.raises(ScheduleError, match="nested in parallel loop i"):
        autotune.lower(s, [A, B])


def test_args_are_checked_against_the_schedule():
    A, B = _vadd()
    s = te.create_schedule(B.op)
    with pytest.raises(ValueError, match="output B is missing from args"):
        autotune.lower(s, [A])
    with pytest.raises(ValueError, match="input A is read but missing"):
        autotune.lower(s, [B])
    with pytest.raises(TypeError, match="expected a te Tensor"):
        autotune.lower(s, [A, "B"])
