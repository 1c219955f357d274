"""Stage.store_in: an attached stage kept in an output's buffer, which overwrites it in place.

Numerics vs numpy on odd shapes, the IR (no buffer of its own) and every rule of
`autotune.ir.inplace` as an error. `test_random_schedules` draws store_in too: a drawn
schedule either lowers to numpy's values or is refused, never a wrong kernel.
"""
import re

import numpy as np
import pytest

import autotune
import autotune.te as te
from autotune.errors import ScheduleError
from autotune.ir.functor import walk
from autotune.ir.nodes import Allocate

from .test_build_numeric import softmax as _softmax, softmax_ref

K = te.reduce_axis((0, 3), name="k")


def _row_schedule(X, mx, ex, sm, Y, vec=8, parallel=True):
    s = te.create_schedule(Y.op)
    i, j = Y.op.axis
    for t in (mx, ex, sm):
        s[t].compute_at(s[Y], i)
    _, ei = s[ex].split(ex.op.axis[1], vec)
    s[ex].vectorize(ei)
    _, ji = s[Y].split(j, vec)
    s[Y].vectorize(ji)
    if parallel:
        s[Y].parallel(i)
    s[ex].store_in(s[Y])
    return s


def _run(s, X, Y, x):
    y = np.full(Y.shape, np.nan, np.float32)
    autotune.build(s, [X, Y])(x, y)
    return y


@pytest.mark.parametrize("M,N,vec", [(7, 203, 8), (3, 1, 4), (5, 97, 16), (1, 1031, 32)])
def test_a_stage_in_the_output_gives_numpys_values(M, N, vec):
    X, mx, ex, sm, Y = _softmax(M, N)
    x = np.random.default_rng(M * N).standard_normal((M, N)).astype(np.float32) * 4
    y = _run(_row_schedule(X, mx, ex, sm, Y, vec), X, Y, x)
    np.testing.assert_allclose(y, softmax_ref(x.astype(np.float64)), rtol=2e-6, atol=1e-7)


def test_the_stage_has_no_buffer_and_writes_the_outputs_row():
    X, mx, ex, sm, Y = _softmax(5, 203)
    func = autotune.lower(_row_schedule(X, mx, ex, sm, Y), [X, Y])
    allocated = []
    walk(func.body, lambda n: allocated.append(n.buffer.name) if isinstance(n, Allocate) else None)
    assert "ex" not in allocated and "mx" in allocated
    assert "Y[ramp(((i * 203) + (j.outer * 8)), 1, 8)] = exp(" in str(func)


def _error(s, X, Y):
    with pytest.raises(ScheduleError) as err:
        autotune.lower(s, [X, Y])
    return str(err.value)


def test_store_in_checks_its_target_at_once():
    X, mx, ex, sm, Y = _softmax(4, 9)
    s = te.create_schedule(Y.op)
    with pytest.raises(ScheduleError, match="sm is not an output"):
        s[ex].store_in(s[sm])
    with pytest.raises(ScheduleError, match=r"expected a Stage"):
        s[ex].store_in(Y)
    Z = te.compute((4,), lambda i: sm[i] * 2.0, name="Z")
    s = te.create_schedule([Y.op, Z.op])
    with pytest.raises(ScheduleError, match=r"Z is float32\[4\], ex is float32\[4, 9\]"):
        s[ex].store_in(s[Z])


def test_a_stage_at_root_is_refused():
    X, mx, ex, sm, Y = _softmax(4, 9)
    s = te.create_schedule(Y.op)
    s[ex].store_in(s[Y])
    assert "must be computed at a loop of Y" in _error(s, X, Y)


def test_a_reader_outside_the_attach_loop_is_refused():
    X, mx, ex, sm, Y = _softmax(4, 9)
    s = te.create_schedule(Y.op)
    i, j = Y.op.axis
    for t in (mx, ex):
        s[t].compute_at(s[Y], i)
    s[sm].compute_at(s[Y], j)          # runs interleaved with Y's stores
    s[ex].store_in(s[Y])
    assert "sm also reads ex; compute it at the same loop (Y.i)" in _error(s, X, Y)


def _doubled_into(output, *extra):
    """X (4 x 9), ex = 2 X, Y = output(ex, X), ex computed at Y's rows and stored in Y; `extra`
    stages read Y. Returns the schedule and its args."""
    X = te.placeholder((4, 9), name="X")
    ex = te.compute((4, 9), lambda i, j: X[i, j] * 2.0, name="ex")
    Y = output(ex, X)
    more = [f(Y) for f in extra]
    s = te.create_schedule([Y.op, *(t.op for t in more)])
    s[ex].compute_at(s[Y], Y.op.axis[0])
    s[ex].store_in(s[Y])
    return s, [X, Y, *more]


@pytest.mark.parametrize("output,extra,message", [
    (lambda ex, X: te.compute((4, 9), lambda i, j: ex[i, 8 - j], name="Y"), (),
     "reads ex at an index other than its own (i, j)"),
    (lambda ex, X: te.compute((4, 9), lambda i, j: te.sum(ex[i, j] * X[K, j], axis=K), name="Y"), (),
     "Y is a reduction"),
    (lambda ex, X: te.compute((4, 9), lambda i, j: ex[i, j] + 1.0, name="Y"),
     (lambda Y: te.compute((4, 9), lambda i, j: Y[i, j] + 1.0, name="Z"),),
     "Y must be at root and read by no other stage"),
], ids=["other index", "reduction", "output read"])
def test_an_output_that_would_read_overwritten_values_is_refused(output, extra, message):
    s, args = _doubled_into(output, *extra)
    with pytest.raises(ScheduleError, match=re.escape(message)):
        autotune.lower(s, args)


def test_an_axis_split_across_the_attach_loop_is_refused():
    X, mx, ex, sm, Y = _softmax(4, 9)
    s = te.create_schedule(Y.op)
    i, j = Y.op.axis
    jo, ji = s[Y].split(j, 4)
    for t in (mx, sm):
        s[t].compute_at(s[Y], i)
    s[ex].compute_at(s[Y], jo)
    s[ex].store_in(s[Y])
    msg = _error(s, X, Y)
    assert "axis j of Y runs partly outside and partly inside the loop j.outer" in msg or "also reads ex" in msg
