"""Illegal schedules raise ScheduleError (a ValueError) naming the stage, the axis and the rule."""
import pytest

import autotune.te as te
from autotune.errors import ScheduleError


def _matmul(M=7, N=11, K=5):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def test_split_factor_must_be_positive():
    _, _, C = _matmul()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match=r"split of C.i: factor must be > 0, got 0"):
        s[C].split(C.op.axis[0], 0)
    with pytest.raises(ScheduleError, match="nparts must be > 0"):
        s[C].split(C.op.axis[0], nparts=-2)
    with pytest.raises(ScheduleError, match="exactly one of"):
        s[C].split(C.op.axis[0])


@pytest.mark.parametrize("prim", ["vectorize", "parallel"])
def test_reduction_axis_cannot_be_vectorized_or_parallel(prim):
    _, _, C = _matmul()
    s = te.create_schedule(C.op)
    with pytest.raises(ScheduleError, match=f"{prim} of C.k: cannot {prim} a reduction axis"):
        getattr(s[C], prim)(C.op.reduce_axis[0])


def test_stale_and_foreign_axes_are_rejected():
    _, _, C = _matmul()
    A2, B2, D = _matmul()
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    s[C].split(i, 4)
    with pytest.raises(ScheduleError, match="C.i: axis was already split"):
        s[C].reorder(i, j)
    with pytest.raises(ScheduleError, match="does not belong to stage C"):
        s[C].reorder(D.op.axis[1], j)


def test_fuse_rules():
    _, _, C = _matmul()
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    with pytest.raises(ScheduleError, match="adjacent"):
        s[C].fuse(j, i)
    with pytest.raises(ScheduleError, match="reduction axis with a data-parallel"):
        s[C].fuse(j, C.op.reduce_axis[0])


def test_compute_at_requires_a_consumer():
    A = te.placeholder((9,), name="A")
    B = te.compute((9,), lambda i: A[i] + 1, name="B")
    C = te.compute((9,), lambda i: A[i] * 2, name="C")
    D = te.compute((9,), lambda i: B[i] + C[i], name="D")
    s = te.create_schedule(D.op)
    with pytest.raises(ScheduleError, match="compute_at of B at C.i: C does not consume B"):
        s[B].compute_at(s[C], C.op.axis[0])
    with pytest.raises(ScheduleError, match="not a current"):
        s[B].compute_at(s[D], C.op.axis[0])
    s[B].compute_at(s[D], D.op.axis[0])  # legal


def test_inline_rules():
    A, B, C = _matmul()
    E = te.compute(C.shape, lambda i, j: C[i, j] + 1, name="E")
    s = te.create_schedule(E.op)
    with pytest.raises(ScheduleError, match="reduction cannot be inlined"):
        s[C].compute_inline()
    with pytest.raises(ScheduleError, match="output cannot be inlined"):
        s[E].compute_inline()


def test_bind_rules():
    _, _, C = _matmul()
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    s[C].bind(i, te.thread_axis("blockIdx.x"))
    with pytest.raises(ScheduleError, match="already bound"):
        s[C].bind(j, te.thread_axis("blockIdx.x"))
    with pytest.raises(ValueError, match="unknown thread tag"):
        te.thread_axis("warp.x")


def test_cache_write_keeps_user_handles():
    _, _, C = _matmul()
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    CC = s.cache_write(C, "local")
    assert s[C].op.axis == (i, j)                  # C's original axes still address C's stage
    assert s[CC].op.reduce_axis and s[CC].op.reduce_axis[0] is not C.op.reduce_axis[0]
    s[C].split(i, 4)
    with pytest.raises(ScheduleError, match="unknown scope"):
        s.cache_write(CC, "texture")


def test_cache_read_needs_readers_that_read():
    A, B, C = _matmul()
    E = te.compute((3,), lambda i: te.const(1.0), name="E")
    s = te.create_schedule([C.op, E.op])
    with pytest.raises(ScheduleError, match="E does not read A"):
        s.cache_read(A, "local", [E])


@pytest.mark.parametrize("prim", ["split", "fuse"])
def test_attach_axis_cannot_be_split_or_fused_after_compute_at(prim):
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((16,), lambda i: B[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], 4)
    s[B].compute_at(s[C], xo)
    with pytest.raises(ScheduleError, match=f"{prim} of C.i.outer: B is computed at this axis; {prim} before compute_at"):
        s[C].fuse(xo, xi) if prim == "fuse" else s[C].split(xo, 2)
