"""te.extern: hand-written loop IR between ordinary computes, and the errors around it."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import autotune
import autotune.te as te
from autotune.errors import ScheduleError
from autotune.ir.builder import IRBuilder
from autotune.te.evaluate import evaluate_te

M, N = 37, 50       # rows and a row length that no vector width divides


def _twice(ins, out):
    """out = 2 * x, rows in parallel, each row one vector loop."""
    (x,) = ins
    ib = IRBuilder()
    with ib.loop(M, "i", "parallel") as i:
        with ib.loop(N, "j", "vectorize") as j:
            ib.store(out, [i, j], ib.load(x, [i, j]) * 2.0)
    return ib.get()


def _pipeline():
    x = te.placeholder((M, N), name="x")
    y = te.compute((M, N), lambda i, j: x[i, j] + 1.0, name="y")
    z = te.extern((M, N), [y], _twice, name="z", flop=M * N)
    w = te.compute((M, N), lambda i, j: z[i, j] - 3.0, name="w")
    return x, y, z, w


def test_extern_between_computes_matches_numpy():
    x, y, z, w = _pipeline()
    s = te.create_schedule(w.op)
    io, _ = s[w].split(w.op.axis[0], 8)
    s[w].parallel(io)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # the hand-written vector loop vectorizes
        f = autotune.build(s, [x, w])
    a = np.random.default_rng(0).standard_normal((M, N)).astype("float32")
    out = np.full((M, N), np.nan, "float32")
    f(a, out)
    np.testing.assert_allclose(out, (a + 1) * 2 - 3, rtol=1e-6)


def test_extern_stage_has_no_loops_to_schedule():
    x, y, z, w = _pipeline()
    s = te.create_schedule(w.op)
    for prim in (lambda: s[z].compute_inline(), lambda: s[z].compute_at(s[w], w.op.axis[0]),
                 lambda: s[z].parallel(w.op.axis[0])):
        with pytest.raises(ScheduleError, match="z: an extern op"):
            prim()
    with pytest.raises(ScheduleError, match="cache_read of y: reader z is not a compute"):
        s.cache_read(y, "local", [z])


def test_extern_inputs_stay_at_root():
    x, y, z, w = _pipeline()
    s = te.create_schedule(w.op)
    with pytest.raises(ScheduleError, match="compute_inline of y: extern z reads y whole, so it must stay at root"):
        s[y].compute_inline()
    with pytest.raises(ScheduleError, match="compute_at of y: extern z reads y whole"):
        s[y].compute_at(s[w], w.op.axis[0])          # w reads y through z: legal but for the extern


def test_extern_flop_counts_and_refusals():
    x, y, z, w = _pipeline()
    from autotune.schedules.task import count_flop

    assert count_flop([w]) == 3 * M * N                 # y, w: one add each; z: its declared flop
    with pytest.raises(TypeError, match="z is not a compute"):
        evaluate_te([w], [x], [np.zeros((M, N), "float32")])
    with pytest.raises(TypeError, match="z is an extern op"):
        autotune.create_task_from_te([w], [x], name="with_extern")


@pytest.mark.parametrize("call, error, match", [
    (lambda x: te.extern((M, N), [x], "not callable"), TypeError, "fbuild must be a function"),
    (lambda x: te.extern((M, 0), [x], _twice), ValueError, "positive int"),
    (lambda x: te.extern((M, N), [x.shape], _twice), TypeError, r"inputs\[0\] must be a te Tensor"),
    (lambda x: te.extern((M, N), [x], _twice, reduction=0), ValueError, "reduction an int >= 1"),
    (lambda x: te.extern((M, N), [], _twice), ValueError, "give dtype="),
])
def test_extern_bad_arguments(call, error, match):
    with pytest.raises(error, match=match):
        call(te.placeholder((M, N), name="x"))


def test_extern_build_must_return_a_statement():
    x = te.placeholder((M, N), name="x")
    z = te.extern((M, N), [x], lambda ins, out: None, name="z")
    with pytest.raises(TypeError, match="extern z: its build function returned NoneType"):
        autotune.lower(te.create_schedule(z.op), [x, z])


def test_ir_builder_errors():
    ib = IRBuilder()
    with pytest.raises(ValueError, match="kind must be one of"):
        with ib.loop(4, "i", "threads"):
            pass
    with pytest.raises(ValueError, match="extent must be an int >= 1"):
        with ib.loop(0, "i"):
            pass
    with pytest.raises(ValueError, match="else_scope must directly follow an if_scope"):
        with ib.else_scope():
            pass
    with pytest.raises(ValueError, match="empty body"):
        with ib.loop(4, "i"):
            pass
    with ib.allocate("t", (4,), "int32") as t:
        with pytest.raises(TypeError, match="value has dtype float32, buffer int32"):
            ib.store(t, [0], te.const(1.0, "float32"))
        with pytest.raises(IndexError, match="indexed with 2 indices"):
            ib.load(t, [0, 1])
        ib.store(t, [0], 1)
